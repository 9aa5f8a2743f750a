import { Organization } from '../../../server/access/organization.entity.js';
import { User } from '../../../server/access/user.entity.js';
import type { Em } from '../../../server/db/orm.js';
import type { EventDefinition } from '../../../server/events/define-event.js';
import type { JobQueue } from '../../../server/jobs/queue.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import type { OrganizationPlan } from '../../../server/kit/plan-limit.js';
import type { PageRequest } from '../../../server/lib/pagination.js';
import type { PlanId } from '../../../server/lib/plans.js';
import { SIZE_SPECS } from '../../../server/modules/databases/databases.constants.js';
import type { DatabaseView } from '../../../server/modules/databases/databases.dto.js';
import type {
  DatabaseScope,
  DatabasesRepository,
  NewBackup,
  NewDatabase,
} from '../../../server/modules/databases/databases.repository.js';
import { DatabaseBackup } from '../../../server/modules/databases/database-backup.entity.js';
import { ManagedDatabase } from '../../../server/modules/databases/database.entity.js';

/**
 * The unit of work of the in-memory repository: a token handed back and forth, nothing in it (rows change in place;
 * {@link InMemoryDatabasesRepository.transaction} puts them back when its work throws).
 */
const UNIT_OF_WORK = {} as Em;

const newestFirst = <T extends { createdAt: Date; id: string }>(a: T, b: T) =>
  b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1);

function page<T>(rows: T[], q: PageRequest) {
  const start = (q.page - 1) * q.limit;
  return {
    items: rows.slice(start, start + q.limit),
    total: rows.length,
    hasMore: start + q.limit < rows.length,
  };
}

const live = (d: ManagedDatabase | undefined) => (d && !d.removedAt ? d : null);

const inScope = (d: ManagedDatabase, scope: DatabaseScope) =>
  (!scope.organization || d.organization.id === scope.organization) &&
  (!scope.user || d.user.id === scope.user);

/** A reference to a row of another module, as an entity read without `populate` holds it: its id only. */
const organizationRef = (id: string) => Object.assign(new Organization(), { id });
const userRef = (id: string) => Object.assign(new User(), { id });

/**
 * The databases module's repository in memory (server/modules/databases/databases.repository.ts), for unit tests of
 * its services and jobs without a database. A transaction that throws leaves the rows as they were. Events are kept
 * in an array to read, and so are the jobs sent through {@link queue} (the deps' `jobs` of the tests).
 */
export class InMemoryDatabasesRepository implements DatabasesRepository {
  readonly databases = new Map<string, ManagedDatabase>();
  readonly backups = new Map<string, DatabaseBackup>();
  readonly periods: { databaseId: string; size: string; startedAt: Date; endedAt: Date | null }[] = [];
  readonly events: { type: string; object: unknown; organizationId: string; at: Date }[] = [];
  readonly jobs: { name: string; data: unknown; delayMs: number }[] = [];
  /** Each organization's plan (`enterprise`, which sets no limit, when absent). */
  readonly plans = new Map<string, PlanId>();

  /** The job queue of the tests' deps: what is sent is kept in {@link jobs} (and undone with its transaction). */
  readonly queue: Pick<JobQueue, 'send'> = {
    send: async (job, data, opts) => {
      this.jobs.push({ name: job.name, data, delayMs: opts?.delayMs ?? 0 });
      return `job_${this.jobs.length}`;
    },
  };

  /** Jobs queued so far with this name, taken off the list. */
  take<T>(name: string): T[] {
    const out: T[] = [];
    for (let i = 0; i < this.jobs.length;) {
      if (this.jobs[i]!.name === name) out.push(this.jobs.splice(i, 1)[0]!.data as T);
      else i++;
    }
    return out;
  }

  // ---------- units of work ----------

  fork(): Em {
    return UNIT_OF_WORK;
  }

  async transaction<R>(_em: Em, work: (tx: Em) => Promise<R>): Promise<R> {
    // Shallow copies of every row (their fields are scalars and references), put back if `work` throws.
    const rows = [...this.databases.values(), ...this.backups.values()].map((r) => [r, { ...r }] as const);
    const before = {
      databases: new Map(this.databases),
      backups: new Map(this.backups),
      periods: this.periods.map((p) => ({ ...p })),
      events: this.events.length,
      jobs: this.jobs.length,
    };
    try {
      return await work(UNIT_OF_WORK);
    } catch (err) {
      for (const [row, copy] of rows) Object.assign(row, copy);
      this.databases.clear();
      for (const [k, v] of before.databases) this.databases.set(k, v);
      this.backups.clear();
      for (const [k, v] of before.backups) this.backups.set(k, v);
      this.periods.splice(0, this.periods.length, ...before.periods);
      this.events.length = before.events;
      this.jobs.length = before.jobs;
      throw err;
    }
  }

  // ---------- reads ----------

  async databasePage(_em: Em, filter: Record<string, unknown>, q: PageRequest) {
    const keys: [string, keyof ManagedDatabase][] = [
      ['engine', 'engine'],
      ['status', 'status'],
      ['region', 'region'],
    ];
    const rows: DatabaseView[] = [...this.databases.values()]
      .filter((d) => !d.removedAt)
      .filter((d) => d.organization.id === filter.organization)
      .filter((d) => filter.user === undefined || d.user.id === filter.user)
      .filter(() => !(filter.id && (filter.id as { $in?: unknown[] }).$in?.length === 0))
      .filter((d) => keys.every(([k, f]) => filter[k] === undefined || d[f] === filter[k]))
      .sort(newestFirst);
    return page(rows, q);
  }

  async findDatabase(_em: Em, scope: DatabaseScope, id: string) {
    const d = live(this.databases.get(id));
    return d && inScope(d, scope) ? d : null;
  }

  async findLiveDatabase(_em: Em, id: string) {
    return live(this.databases.get(id));
  }

  async backupPage(
    _em: Em,
    databaseId: string,
    filter: { type?: string | undefined; status?: string | undefined },
    q: PageRequest,
  ) {
    const rows = [...this.backups.values()]
      .filter((b) => b.database.id === databaseId)
      .filter((b) => !filter.type || b.type === filter.type)
      .filter((b) => !filter.status || b.status === filter.status)
      .sort(newestFirst);
    return page(rows, q);
  }

  async findPendingBackup(_em: Em, id: string) {
    const b = this.backups.get(id);
    return b && b.status === 'pending' ? b : null;
  }

  async latestFinalBackup(_em: Em, databaseId: string) {
    return (
      [...this.backups.values()]
        .filter((b) => b.database.id === databaseId && b.type === 'final')
        .sort(newestFirst)[0] ?? null
    );
  }

  async deletionsDue(_em: Em, now: Date, limit: number) {
    return [...this.databases.values()]
      .filter(
        (d) =>
          d.status === 'deleting' && !d.removedAt && d.deletionScheduledAt && d.deletionScheduledAt <= now,
      )
      .slice(0, limit)
      .map((d) => ({ id: d.id }));
  }

  async stuckTransitions(_em: Em, before: Date, limit: number) {
    return [...this.databases.values()]
      .filter(
        (d) => (d.status === 'creating' || d.status === 'resizing') && !d.removedAt && d.updatedAt < before,
      )
      .slice(0, limit)
      .map((d) => ({ id: d.id, generation: d.generation }));
  }

  async overdueBackups(_em: Em, before: Date, limit: number) {
    return [...this.backups.values()]
      .filter((b) => b.status === 'pending' && b.createdAt < before)
      .slice(0, limit)
      .map((b) => ({ id: b.id }));
  }

  async runningOnServers(_em: Em, limit: number) {
    return [...this.databases.values()]
      .filter((d) => d.server && d.status === 'running' && !d.removedAt)
      .slice(0, limit);
  }

  // ---------- in a transaction ----------

  async lockOwner(): Promise<void> {}

  async lockPlan(_tx: Em, organizationId: string): Promise<OrganizationPlan> {
    return { plan: this.plans.get(organizationId) ?? 'enterprise', status: 'active' };
  }

  async lockedDatabaseCount(_tx: Em, _deps: AppDeps, organizationId: string) {
    return [...this.databases.values()].filter(
      (d) => d.organization.id === organizationId && !d.removedAt && d.status !== 'deleting',
    ).length;
  }

  async lockedBackupUsage(_tx: Em, organizationId: string) {
    const backups = [...this.backups.values()].filter((b) => b.organization.id === organizationId);
    return {
      manual: backups.filter((b) => b.type === 'manual' && b.status !== 'failed').length,
      bytes: backups.filter((b) => b.status === 'completed').reduce((sum, b) => sum + (b.sizeBytes ?? 0), 0),
    };
  }

  async lockDatabase(_tx: Em, id: string, scope: DatabaseScope = {}, opts: { removed?: boolean } = {}) {
    const d = this.databases.get(id);
    if (!d || (!opts.removed && d.removedAt) || !inScope(d, scope)) return null;
    return d;
  }

  async findBackup(_tx: Em, id: string, organizationId: string) {
    const b = this.backups.get(id);
    return b && b.organization.id === organizationId ? b : null;
  }

  async lockBackup(_tx: Em, id: string) {
    return this.backups.get(id) ?? null;
  }

  async lockBackupsOf(_tx: Em, databaseId: string) {
    return [...this.backups.values()]
      .filter((b) => b.database.id === databaseId)
      .sort((a, b) => -newestFirst(a, b));
  }

  async lockExpiredBackups(_tx: Em, now: Date, limit: number) {
    return [...this.backups.values()].filter((b) => b.expiresAt && b.expiresAt <= now).slice(0, limit);
  }

  async getDatabase(_tx: Em, id: string) {
    const d = this.databases.get(id);
    if (!d) throw new Error(`no database ${id}`);
    return d;
  }

  async nameTaken(_tx: Em, organizationId: string, name: string) {
    return [...this.databases.values()].some(
      (d) => d.organization.id === organizationId && d.name === name && !d.removedAt,
    );
  }

  async serverLoad(_tx: Em, servers: string[]) {
    const load = new Map<string, { databases: number; connections: number }>();
    for (const d of this.databases.values()) {
      if (d.removedAt || d.status === 'failed' || !d.server || !servers.includes(d.server)) continue;
      const held = load.get(d.server) ?? { databases: 0, connections: 0 };
      held.databases += 1;
      held.connections += SIZE_SPECS[d.size].maxConnections;
      load.set(d.server, held);
    }
    return load;
  }

  createDatabase(_tx: Em, { organizationId, userId, ...fields }: NewDatabase): ManagedDatabase {
    const d = Object.assign(new ManagedDatabase(), fields, {
      organization: organizationRef(organizationId),
      user: userRef(userId),
    });
    this.databases.set(d.id, d);
    return d;
  }

  createBackup(_tx: Em, fields: NewBackup): DatabaseBackup {
    const b = Object.assign(new DatabaseBackup(), fields, {
      organization: fields.database.organization,
      failureReason: null,
    });
    this.backups.set(b.id, b);
    return b;
  }

  removeBackup(_tx: Em, b: DatabaseBackup) {
    this.backups.delete(b.id);
  }

  openUsagePeriod(_tx: Em, d: ManagedDatabase, now: Date) {
    this.periods.push({ databaseId: d.id, size: d.size, startedAt: now, endedAt: null });
  }

  async closeUsagePeriod(_tx: Em, databaseId: string, now: Date) {
    for (const p of this.periods) if (p.databaseId === databaseId && !p.endedAt) p.endedAt = now;
  }

  async setAutomaticBackupExpiry(_tx: Em, databaseId: string, days: number, now: Date) {
    for (const b of this.backups.values()) {
      if (b.database.id === databaseId && b.type === 'automatic') {
        b.expiresAt = new Date(b.createdAt.getTime() + days * 86_400_000);
        b.updatedAt = now;
      }
    }
  }

  async keepFinalBackups(_tx: Em, databaseId: string, now: Date) {
    for (const b of this.backups.values()) {
      if (b.database.id === databaseId && b.type === 'final' && b.expiresAt) {
        b.expiresAt = null;
        b.updatedAt = now;
      }
    }
  }

  recordEvent<P>(_tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, at: Date): void {
    this.events.push({ type: event.type, object: structuredClone(payload), organizationId, at });
  }
}
