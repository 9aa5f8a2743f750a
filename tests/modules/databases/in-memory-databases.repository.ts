import type { PageRequest } from '../../../server/lib/pagination.js';
import { planLimitExceeded } from '../../../server/lib/errors.js';
import type { DatabaseView } from '../../../server/modules/databases/databases.dto.js';
import type {
  DatabaseScope,
  DatabasesRepository,
  DatabasesStore,
  DatabasesTx,
  NewBackup,
  NewDatabase,
} from '../../../server/modules/databases/databases.repository.js';
import type { DatabaseBackup } from '../../../server/modules/databases/database-backup.entity.js';
import type { ManagedDatabase } from '../../../server/modules/databases/database.entity.js';

/**
 * The databases module's repository in memory (server/modules/databases/databases.repository.ts), for unit tests of
 * its services and jobs without a database. A transaction that throws leaves the rows as they were; events and
 * jobs are kept in arrays to read.
 */
export class InMemoryDatabasesRepository implements DatabasesRepository {
  readonly databases = new Map<string, ManagedDatabase>();
  readonly backups = new Map<string, DatabaseBackup>();
  readonly periods: { databaseId: string; size: string; startedAt: Date; endedAt: Date | null }[] = [];
  readonly events: { type: string; object: unknown; organizationId: string; at: Date }[] = [];
  readonly jobs: { name: string; data: unknown; delayMs: number }[] = [];
  /** Databases each organization's plan allows (unlimited when absent). */
  readonly limits = new Map<string, number>();

  on(): DatabasesStore {
    return this.store;
  }

  fresh(): DatabasesStore {
    return this.store;
  }

  /** Jobs queued so far with this name, taken off the list. */
  take<T>(name: string): T[] {
    const out: T[] = [];
    for (let i = 0; i < this.jobs.length;) {
      if (this.jobs[i]!.name === name) out.push(this.jobs.splice(i, 1)[0]!.data as T);
      else i++;
    }
    return out;
  }

  private readonly store: DatabasesStore = storeFor(this);
}

/** The store over `repo`'s rows. */
function storeFor(repo: InMemoryDatabasesRepository): DatabasesStore {
  {
    const live = (d: ManagedDatabase | undefined) => (d && !d.removedAt ? d : null);
    const inScope = (d: ManagedDatabase, scope: DatabaseScope) =>
      (!scope.organization || d.organization.id === scope.organization) &&
      (!scope.user || d.user.id === scope.user);
    const newestFirst = <T extends { createdAt: Date; id: string }>(a: T, b: T) =>
      b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1);
    const page = <T>(rows: T[], q: PageRequest) => {
      const start = (q.page - 1) * q.limit;
      return {
        items: rows.slice(start, start + q.limit),
        total: rows.length,
        hasMore: start + q.limit < rows.length,
      };
    };

    const tx: DatabasesTx = {
      async lockOwner() {},
      async assertWithinPlan(organizationId) {
        const limit = repo.limits.get(organizationId);
        if (limit === undefined) return;
        const current = [...repo.databases.values()].filter(
          (d) => d.organization.id === organizationId && !d.removedAt && d.status !== 'deleting',
        ).length;
        if (current >= limit) {
          throw planLimitExceeded(`Your plan allows ${limit} databases`, {
            resource: 'databases',
            limit,
            current,
          });
        }
      },
      async lockDatabase(id, scope = {}, opts = {}) {
        const d = repo.databases.get(id);
        if (!d || (!opts.removed && d.removedAt) || !inScope(d, scope)) return null;
        return d;
      },
      async findBackup(id, organizationId) {
        const b = repo.backups.get(id);
        return b && b.organization.id === organizationId ? b : null;
      },
      async lockBackup(id) {
        return repo.backups.get(id) ?? null;
      },
      async lockBackupsOf(databaseId) {
        return [...repo.backups.values()]
          .filter((b) => b.database.id === databaseId)
          .sort((a, b) => -newestFirst(a, b));
      },
      async lockExpiredBackups(now, limit) {
        return [...repo.backups.values()].filter((b) => b.expiresAt && b.expiresAt <= now).slice(0, limit);
      },
      async getDatabase(id) {
        const d = repo.databases.get(id);
        if (!d) throw new Error(`no database ${id}`);
        return d;
      },
      async nameTaken(organizationId, name) {
        return [...repo.databases.values()].some(
          (d) => d.organization.id === organizationId && d.name === name && !d.removedAt,
        );
      },
      async databasesPerServer(servers) {
        const held = new Map<string, number>();
        for (const d of repo.databases.values()) {
          if (!d.removedAt && d.server && servers.includes(d.server))
            held.set(d.server, (held.get(d.server) ?? 0) + 1);
        }
        return held;
      },
      createDatabase({ organizationId, userId, ...fields }: NewDatabase) {
        const d = {
          ...fields,
          organization: { id: organizationId },
          user: { id: userId },
        } as unknown as ManagedDatabase;
        repo.databases.set(d.id, d);
        return d;
      },
      createBackup(fields: NewBackup) {
        const b = {
          ...fields,
          organization: fields.database.organization,
          database: fields.database,
          failureReason: null,
        } as unknown as DatabaseBackup;
        repo.backups.set(b.id, b);
        return b;
      },
      removeBackup(b) {
        repo.backups.delete(b.id);
      },
      openUsagePeriod(d, now) {
        repo.periods.push({ databaseId: d.id, size: d.size, startedAt: now, endedAt: null });
      },
      async closeUsagePeriod(databaseId, now) {
        for (const p of repo.periods) if (p.databaseId === databaseId && !p.endedAt) p.endedAt = now;
      },
      async setAutomaticBackupExpiry(databaseId, days, now) {
        for (const b of repo.backups.values()) {
          if (b.database.id === databaseId && b.type === 'automatic') {
            b.expiresAt = new Date(b.createdAt.getTime() + days * 86_400_000);
            b.updatedAt = now;
          }
        }
      },
      async keepFinalBackups(databaseId, now) {
        for (const b of repo.backups.values()) {
          if (b.database.id === databaseId && b.type === 'final' && b.expiresAt) {
            b.expiresAt = null;
            b.updatedAt = now;
          }
        }
      },
      recordEvent(event, object, organizationId, at) {
        repo.events.push({ type: event.type, object: structuredClone(object), organizationId, at });
      },
      async queue(job, data, delayMs) {
        repo.jobs.push({ name: job.name, data, delayMs });
        return () => {};
      },
    };

    return {
      async transaction<T>(fn: (t: DatabasesTx) => Promise<T>): Promise<T> {
        // Shallow copies of every row (their fields are scalars and references), put back if `fn` throws.
        const rows = [...repo.databases.values(), ...repo.backups.values()].map(
          (r) => [r, { ...r }] as const,
        );
        const before = {
          databases: new Map(repo.databases),
          backups: new Map(repo.backups),
          periods: repo.periods.map((p) => ({ ...p })),
          events: repo.events.length,
          jobs: repo.jobs.length,
        };
        try {
          return await fn(tx);
        } catch (err) {
          for (const [row, copy] of rows) Object.assign(row, copy);
          repo.databases.clear();
          for (const [k, v] of before.databases) repo.databases.set(k, v);
          repo.backups.clear();
          for (const [k, v] of before.backups) repo.backups.set(k, v);
          repo.periods.splice(0, repo.periods.length, ...before.periods);
          repo.events.length = before.events;
          repo.jobs.length = before.jobs;
          throw err;
        }
      },
      async databasePage(filter: Record<string, unknown>, q: PageRequest) {
        const keys: [string, keyof ManagedDatabase][] = [
          ['engine', 'engine'],
          ['status', 'status'],
          ['region', 'region'],
        ];
        const rows = [...repo.databases.values()]
          .filter((d) => !d.removedAt)
          .filter((d) => d.organization.id === filter.organization)
          .filter((d) => filter.user === undefined || d.user.id === filter.user)
          .filter(() => !(filter.id && (filter.id as { $in?: unknown[] }).$in?.length === 0))
          .filter((d) => keys.every(([k, f]) => filter[k] === undefined || d[f] === filter[k]))
          .sort(newestFirst);
        return page(rows as unknown as DatabaseView[], q);
      },
      async findDatabase(scope, id) {
        const d = live(repo.databases.get(id));
        return d && inScope(d, scope) ? d : null;
      },
      async findLiveDatabase(id) {
        return live(repo.databases.get(id));
      },
      async backupPage(databaseId, filter, q) {
        const rows = [...repo.backups.values()]
          .filter((b) => b.database.id === databaseId)
          .filter((b) => !filter.type || b.type === filter.type)
          .filter((b) => !filter.status || b.status === filter.status)
          .sort(newestFirst);
        return page(rows, q);
      },
      async findPendingBackup(id) {
        const b = repo.backups.get(id);
        return b && b.status === 'pending' ? b : null;
      },
      async latestFinalBackup(databaseId) {
        return (
          [...repo.backups.values()]
            .filter((b) => b.database.id === databaseId && b.type === 'final')
            .sort(newestFirst)[0] ?? null
        );
      },
      async deletionsDue(now, limit) {
        return [...repo.databases.values()]
          .filter(
            (d) =>
              d.status === 'deleting' &&
              !d.removedAt &&
              d.deletionScheduledAt &&
              d.deletionScheduledAt <= now,
          )
          .slice(0, limit)
          .map((d) => ({ id: d.id }));
      },
      async stuckTransitions(before, limit) {
        return [...repo.databases.values()]
          .filter(
            (d) =>
              (d.status === 'creating' || d.status === 'resizing') && !d.removedAt && d.updatedAt < before,
          )
          .slice(0, limit)
          .map((d) => ({ id: d.id, generation: d.generation }));
      },
      async overdueBackups(before, limit) {
        return [...repo.backups.values()]
          .filter((b) => b.status === 'pending' && b.createdAt < before)
          .slice(0, limit)
          .map((b) => ({ id: b.id }));
      },
      async runningOnServers(limit) {
        return [...repo.databases.values()]
          .filter((d) => d.server && d.status === 'running' && !d.removedAt)
          .slice(0, limit);
      },
    };
  }
}
