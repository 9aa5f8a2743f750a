import { LockMode, type FilterQuery } from '@mikro-orm/core';
import { MikroOrmRepository } from '../../kit/repository.js';
import { lockOwner } from '../../access/owned-resources.js';
import { User } from '../../access/user.entity.js';
import type { ListCountSpec } from '../../db/list-counts.js';
import type { Database, Em } from '../../db/orm.js';
import { findPage } from '../../db/pagination.js';
import { epochMs, findRawPage, fromEpochMs as ms, type RawPageSpec } from '../../db/raw-page.js';
import type { EventDefinition } from '../../events/define-event.js';
import type { AppDeps } from '../../kit/deps.js';
import { lockOrganizationPlan, lockPlanCounter, type OrganizationPlan } from '../../kit/plan-limit.js';
import type { UsagePeriod } from '../../kit/usage.js';
import type { PageRequest } from '../../lib/pagination.js';
import {
  BACKUP_STATUSES,
  BACKUP_TYPES,
  DATABASE_ENGINES,
  DATABASE_REGIONS,
  DATABASE_STATUSES,
  SIZE_SPECS,
  type DatabaseEngine,
  type DatabaseRegion,
  type DatabaseSize,
  type DatabaseStatus,
} from './databases.constants.js';
import type { DatabaseView } from './databases.dto.js';
import { DatabaseBackup } from './database-backup.entity.js';
import { DatabaseUsagePeriod } from './database-usage-period.entity.js';
import { ManagedDatabase } from './database.entity.js';

/**
 * Every read and write of the databases module's tables (docs/adding-a-module.md, "Checklist", step 3): services and
 * jobs reach their rows only through a {@link DatabasesRepository} (`repositoryOf(deps, 'databases')`), handing it
 * their unit of work (`em`, or the `tx` of a transaction) on each call, so that they run against the in-memory one of
 * the unit tests (tests/modules/databases/in-memory-databases.repository.ts) as well as against the database.
 */

/** The module's tables (the manifest's lists name them from here). */
export const DATABASES_TABLES = {
  databases: 'databases',
  backups: 'database_backups',
  usagePeriods: 'database_usage_periods',
} as const;

/** Who may see a row: the organization and, for members, the owner (access/scope.ts: ownedBy). */
export type DatabaseScope = Record<string, string>;

/** What a database is created with (the row's other columns start empty). */
export type NewDatabase = Omit<
  ManagedDatabase,
  'organization' | 'user' | 'restoredFromBackupId' | 'statusReason' | 'readOnly' | 'sslRequired' | 'port'
> & {
  organizationId: string;
  userId: string;
  port: number | null;
  sslRequired: boolean;
  readOnly: boolean;
  statusReason: string | null;
  restoredFromBackupId: string | null;
};

export type NewBackup = Pick<
  DatabaseBackup,
  | 'id'
  | 'createdAt'
  | 'updatedAt'
  | 'type'
  | 'status'
  | 'name'
  | 'description'
  | 'sizeBytes'
  | 'completedAt'
  | 'expiresAt'
> & { database: ManagedDatabase };

/** A billable period of a database, as the usage report reads it. */
export interface UsagePeriodRow {
  database_id: string;
  name: string;
  size: DatabaseSize;
  started_ms: number | string;
  ended_ms: number | string | null;
}

export interface DatabasesRepository {
  // ---------- units of work ----------
  /** A fresh unit of work (jobs). */
  fork(): Em;
  /** Runs `work` in a transaction of `em` (committed when it returns, rolled back when it throws). */
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;

  // ---------- reads ----------
  /** One page of the databases matching `filter` (scoped already: access/scope.ts), newest first, with the total. */
  databasePage(
    em: Em,
    filter: Record<string, unknown>,
    page: PageRequest,
  ): Promise<{ items: DatabaseView[]; total: number; hasMore: boolean }>;
  /** The database `id` within `scope`, not removed. */
  findDatabase(em: Em, scope: DatabaseScope, id: string): Promise<ManagedDatabase | null>;
  /** The database `id` not removed (jobs). */
  findLiveDatabase(em: Em, id: string): Promise<ManagedDatabase | null>;
  /** A page of a database's backups, newest first; `filter`: `type`, `status`. */
  backupPage(
    em: Em,
    databaseId: string,
    filter: { type?: string | undefined; status?: string | undefined },
    page: PageRequest,
  ): Promise<{ items: DatabaseBackup[]; total: number; hasMore: boolean }>;
  findPendingBackup(em: Em, id: string): Promise<DatabaseBackup | null>;
  /** The newest final backup of a database. */
  latestFinalBackup(em: Em, databaseId: string): Promise<DatabaseBackup | null>;
  /** Ids of the `deleting` databases whose removal is due at `now`. */
  deletionsDue(em: Em, now: Date, limit: number): Promise<{ id: string }[]>;
  /** `creating` or `resizing` databases unchanged since before `before`. */
  stuckTransitions(em: Em, before: Date, limit: number): Promise<{ id: string; generation: number }[]>;
  /** `pending` backups created before `before`. */
  overdueBackups(em: Em, before: Date, limit: number): Promise<{ id: string }[]>;
  /** The `running` databases on real servers (the storage check). */
  runningOnServers(em: Em, limit: number): Promise<ManagedDatabase[]>;

  // ---------- in a transaction: the reads that lock, the writes, and the events that commit with them ----------
  /** The user's row, shared-locked (a deleted user cannot create); 401 when gone. */
  lockOwner(tx: Em, userId: string): Promise<void>;
  /** The organization's plan, share-locked to the commit (kit/plan-limit.ts): a plan change waits for the creates. */
  lockPlan(tx: Em, organizationId: string): Promise<OrganizationPlan>;
  /**
   * The organization's databases as the plan counts them (`databases`), after queuing on its creates of databases
   * (an advisory lock held to the commit): each create counts what the ones before it committed.
   */
  lockedDatabaseCount(tx: Em, deps: AppDeps, organizationId: string): Promise<number>;
  /**
   * What the organization's backups hold against its plan's backup limits: manual backups kept (not failed) and
   * bytes of its completed backups, after queuing on its manual backups (an advisory lock held to the commit), so
   * that they are checked one after the other.
   */
  lockedBackupUsage(tx: Em, organizationId: string): Promise<{ manual: number; bytes: number }>;
  /** The database `id` (within `scope` when given), not removed (unless `removed`), locked for update. */
  lockDatabase(
    tx: Em,
    id: string,
    scope?: DatabaseScope,
    opts?: { removed?: boolean },
  ): Promise<ManagedDatabase | null>;
  /** A backup of the organization. */
  findBackup(tx: Em, id: string, organizationId: string): Promise<DatabaseBackup | null>;
  /** A backup locked for update, read again from the database. */
  lockBackup(tx: Em, id: string): Promise<DatabaseBackup | null>;
  /** Every backup of a database, oldest first, locked for update. */
  lockBackupsOf(tx: Em, databaseId: string): Promise<DatabaseBackup[]>;
  /** Backups expired at `now`, locked for update. */
  lockExpiredBackups(tx: Em, now: Date, limit: number): Promise<DatabaseBackup[]>;
  /** A database by id, removed or not. */
  getDatabase(tx: Em, id: string): Promise<ManagedDatabase>;
  /** Whether `name` is taken in the organization by a database not removed. */
  nameTaken(tx: Em, organizationId: string, name: string): Promise<boolean>;
  /**
   * Per server of `servers`: the databases it holds and the sum of their connection limits (not removed, not
   * failed; a resizing one at its new size). The servers stay locked until the commit, so that placements and
   * resizes on one server are decided one at a time.
   */
  serverLoad(tx: Em, servers: string[]): Promise<Map<string, { databases: number; connections: number }>>;
  createDatabase(tx: Em, fields: NewDatabase): ManagedDatabase;
  createBackup(tx: Em, fields: NewBackup): DatabaseBackup;
  removeBackup(tx: Em, b: DatabaseBackup): void;
  /** Starts a billable period of the database at its current size. */
  openUsagePeriod(tx: Em, d: ManagedDatabase, now: Date): void;
  /** Ends the database's open billable period, if any. */
  closeUsagePeriod(tx: Em, databaseId: string, now: Date): Promise<void>;
  /** Automatic backups expire `days` after their creation, those taken already included. */
  setAutomaticBackupExpiry(tx: Em, databaseId: string, days: number, now: Date): Promise<void>;
  /** The final backups of a database no longer expire (a canceled deletion). */
  keepFinalBackups(tx: Em, databaseId: string, now: Date): Promise<void>;
  /** Records an organization's webhook event in `tx` (the transactional outbox). */
  recordEvent<P>(tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, now: Date): void;
}

/** The billable periods of the organization's databases that overlap `period` (databases.usage.ts). */
export async function usagePeriodRows(
  em: Em,
  organizationId: string,
  period: UsagePeriod,
): Promise<UsagePeriodRow[]> {
  return em.execute<UsagePeriodRow[]>(
    `select p.database_id, d.name, p.size,
            (extract(epoch from p.started_at) * 1000)::float8 as started_ms,
            (extract(epoch from p.ended_at) * 1000)::float8 as ended_ms
       from ${DATABASES_TABLES.usagePeriods} p join ${DATABASES_TABLES.databases} d on d.id = p.database_id
      where p.organization_id = ? and p.started_at < ? and (p.ended_at is null or p.ended_at > ?)
      order by p.started_at, p.id`,
    [organizationId, period.end, period.start],
  );
}

/**
 * The database list is the module's hot read: one prepared round trip for the page and its total, rows mapped straight
 * to the list view (server/db/raw-page.ts). Everything else goes through the ORM.
 */

/** The list's columns, and the filter keys (access/scope.ts: ownedBy, ownedListFilter; the list filters) it takes. */
const LIST: RawPageSpec = {
  table: 'databases',
  select: `
    id, name, engine, version, status, region, size, host, port, server, ssl_required, db_name, db_user,
    multi_az, backup_enabled,
    backup_retention, user_id, ${epochMs('created_at')} as created_ms,
    ${epochMs('updated_at')} as updated_ms, ${epochMs('last_backup_at')} as last_backup_ms,
    ${epochMs('next_backup_at')} as next_backup_ms,
    ${epochMs('deletion_scheduled_at')} as deletion_scheduled_ms`,
  columns: {
    organization: 'organization_id',
    user: 'user_id',
    engine: 'engine',
    status: 'status',
    region: 'region',
  },
  always: ['"removed_at" is null'],
  counts: {
    list: 'databases',
    scope: 'organization',
    owner: 'user',
    dims: [
      { key: 'engine', values: DATABASE_ENGINES },
      { key: 'status', values: DATABASE_STATUSES },
      { key: 'region', values: DATABASE_REGIONS },
    ],
  },
};

interface ListRow {
  id: string;
  name: string;
  engine: DatabaseEngine;
  version: string;
  status: DatabaseStatus;
  region: DatabaseRegion;
  size: DatabaseSize;
  host: string;
  port: number | null;
  server: string | null;
  ssl_required: boolean;
  db_name: string;
  db_user: string;
  multi_az: boolean;
  backup_enabled: boolean;
  backup_retention: number;
  user_id: string;
  created_ms: number | string;
  updated_ms: number | string;
  last_backup_ms: number | string | null;
  next_backup_ms: number | string | null;
  deletion_scheduled_ms: number | string | null;
}

function toView(r: ListRow): DatabaseView {
  return {
    id: r.id,
    name: r.name,
    engine: r.engine,
    version: r.version,
    status: r.status,
    region: r.region,
    size: r.size,
    host: r.host,
    port: r.port,
    server: r.server,
    sslRequired: r.ssl_required,
    dbName: r.db_name,
    dbUser: r.db_user,
    multiAz: r.multi_az,
    backupEnabled: r.backup_enabled,
    backupRetention: r.backup_retention,
    user: { id: r.user_id },
    createdAt: ms(r.created_ms)!,
    updatedAt: ms(r.updated_ms)!,
    lastBackupAt: ms(r.last_backup_ms),
    nextBackupAt: ms(r.next_backup_ms),
    deletionScheduledAt: ms(r.deletion_scheduled_ms),
  };
}

/** One page of the databases matching `filter` (already scoped), newest first, with the total. */
async function findDatabasePage(
  em: Em,
  db: Database,
  filter: Record<string, unknown>,
  page: PageRequest,
): Promise<{ items: DatabaseView[]; total: number; hasMore: boolean }> {
  const found = await findRawPage<ListRow>(em, db, LIST, filter, page);
  return { total: found.total, hasMore: found.hasMore, items: found.rows.map(toView) };
}

/** A database's backup list's maintained counts (migration 30, list_counts). */
const BACKUP_COUNTS: ListCountSpec = {
  list: 'database_backups',
  scope: 'database',
  dims: [
    { key: 'type', values: BACKUP_TYPES },
    { key: 'status', values: BACKUP_STATUSES },
  ],
};

const FOR_UPDATE = { lockMode: LockMode.PESSIMISTIC_WRITE } as const;

/**
 * The repository on the API's database (MikroORM); the module's `create` builds it (`repositoryOf(deps,
 * 'databases')`).
 */
export class MikroOrmDatabasesRepository extends MikroOrmRepository implements DatabasesRepository {
  // ---------- reads ----------

  databasePage(em: Em, filter: Record<string, unknown>, page: PageRequest) {
    return findDatabasePage(em, this.db, filter, page);
  }

  findDatabase(em: Em, scope: DatabaseScope, id: string) {
    return em.findOne(ManagedDatabase, { id, removedAt: null, ...scope });
  }

  findLiveDatabase(em: Em, id: string) {
    return em.findOne(ManagedDatabase, { id, removedAt: null });
  }

  async backupPage(
    em: Em,
    databaseId: string,
    filter: { type?: string | undefined; status?: string | undefined },
    page: PageRequest,
  ) {
    const where: Record<string, string> = { database: databaseId };
    if (filter.type) where.type = filter.type;
    if (filter.status) where.status = filter.status;
    return findPage(em, DatabaseBackup, where as FilterQuery<DatabaseBackup>, page, {
      counted: { spec: BACKUP_COUNTS, filter: where },
    });
  }

  findPendingBackup(em: Em, id: string) {
    return em.findOne(DatabaseBackup, { id, status: 'pending' });
  }

  latestFinalBackup(em: Em, databaseId: string) {
    return em.findOne(
      DatabaseBackup,
      { database: databaseId, type: 'final' },
      { orderBy: { createdAt: 'desc', id: 'desc' } },
    );
  }

  deletionsDue(em: Em, now: Date, limit: number) {
    return em.find(
      ManagedDatabase,
      { status: 'deleting', removedAt: null, deletionScheduledAt: { $lte: now } },
      { fields: ['id'], limit },
    );
  }

  stuckTransitions(em: Em, before: Date, limit: number) {
    return em.find(
      ManagedDatabase,
      { status: { $in: ['creating', 'resizing'] }, removedAt: null, updatedAt: { $lt: before } },
      { fields: ['id', 'generation'], limit },
    );
  }

  overdueBackups(em: Em, before: Date, limit: number) {
    return em.find(
      DatabaseBackup,
      { status: 'pending', createdAt: { $lt: before } },
      { fields: ['id'], limit },
    );
  }

  runningOnServers(em: Em, limit: number) {
    return em.find(ManagedDatabase, { server: { $ne: null }, status: 'running', removedAt: null }, { limit });
  }

  // ---------- in a transaction ----------

  lockOwner(tx: Em, userId: string) {
    return lockOwner(tx, userId);
  }

  lockPlan(tx: Em, organizationId: string) {
    return lockOrganizationPlan(tx, organizationId);
  }

  async lockedDatabaseCount(tx: Em, deps: AppDeps, organizationId: string) {
    await lockPlanCounter(tx, organizationId, 'databases');
    return deps.registry.usage.current(tx, organizationId, 'databases', deps.clock.now());
  }

  async lockedBackupUsage(tx: Em, organizationId: string) {
    await lockPlanCounter(tx, organizationId, 'backups');
    const [row] = await tx.execute<{ manual: string | number; bytes: string | number | null }[]>(
      `select count(*) filter (where type = 'manual' and status <> 'failed') as manual,
              coalesce(sum(size_bytes) filter (where status = 'completed'), 0) as bytes
         from ${DATABASES_TABLES.backups} where organization_id = ?`,
      [organizationId],
    );
    return { manual: Number(row?.manual ?? 0), bytes: Number(row?.bytes ?? 0) };
  }

  lockDatabase(tx: Em, id: string, scope: DatabaseScope = {}, opts: { removed?: boolean } = {}) {
    return tx.findOne(
      ManagedDatabase,
      { id, ...(opts.removed ? {} : { removedAt: null }), ...scope },
      FOR_UPDATE,
    );
  }

  findBackup(tx: Em, id: string, organizationId: string) {
    return tx.findOne(DatabaseBackup, { id, organization: organizationId });
  }

  lockBackup(tx: Em, id: string) {
    return tx.findOne(DatabaseBackup, { id }, { ...FOR_UPDATE, refresh: true });
  }

  lockBackupsOf(tx: Em, databaseId: string) {
    return tx.find(
      DatabaseBackup,
      { database: databaseId },
      { ...FOR_UPDATE, orderBy: { createdAt: 'asc', id: 'asc' } },
    );
  }

  lockExpiredBackups(tx: Em, now: Date, limit: number) {
    return tx.find(DatabaseBackup, { expiresAt: { $lte: now } }, { limit, ...FOR_UPDATE });
  }

  getDatabase(tx: Em, id: string) {
    return tx.findOneOrFail(ManagedDatabase, id);
  }

  async nameTaken(tx: Em, organizationId: string, name: string) {
    return (await tx.count(ManagedDatabase, { organization: organizationId, name, removedAt: null })) > 0;
  }

  async serverLoad(tx: Em, servers: string[]) {
    for (const server of [...new Set(servers)].sort()) {
      await tx.execute('select pg_advisory_xact_lock(hashtext(?))', [`databases.server:${server}`]);
    }
    const limit = Object.entries(SIZE_SPECS)
      .map(([size, spec]) => `when '${size}' then ${Math.trunc(spec.maxConnections)}`)
      .join(' ');
    const rows = await tx.execute<{ server: string; n: string | number; c: string | number }[]>(
      `select server, count(*) as n, coalesce(sum(case size ${limit} else 0 end), 0) as c
         from ${DATABASES_TABLES.databases}
        where removed_at is null and status <> 'failed' and server in (${servers.map(() => '?').join(', ')})
        group by server`,
      servers,
    );
    return new Map(rows.map((r) => [r.server, { databases: Number(r.n), connections: Number(r.c) }]));
  }

  createDatabase(tx: Em, { organizationId, userId, ...fields }: NewDatabase) {
    return tx.create(ManagedDatabase, {
      ...fields,
      organization: organizationId,
      user: tx.getReference(User, userId),
    });
  }

  createBackup(tx: Em, fields: NewBackup) {
    return tx.create(DatabaseBackup, { ...fields, organization: fields.database.organization });
  }

  removeBackup(tx: Em, b: DatabaseBackup) {
    tx.remove(b);
  }

  openUsagePeriod(tx: Em, d: ManagedDatabase, now: Date) {
    tx.create(DatabaseUsagePeriod, {
      organization: d.organization,
      database: d,
      size: d.size,
      startedAt: now,
      endedAt: null,
    });
  }

  async closeUsagePeriod(tx: Em, databaseId: string, now: Date) {
    await tx.nativeUpdate(DatabaseUsagePeriod, { database: databaseId, endedAt: null }, { endedAt: now });
  }

  async setAutomaticBackupExpiry(tx: Em, databaseId: string, days: number, now: Date) {
    await tx.execute(
      `update ${DATABASES_TABLES.backups} set expires_at = created_at + ? * interval '1 day', updated_at = ?
        where database_id = ? and type = 'automatic'`,
      [days, now, databaseId],
    );
  }

  async keepFinalBackups(tx: Em, databaseId: string, now: Date) {
    await tx.nativeUpdate(
      DatabaseBackup,
      { database: databaseId, type: 'final', expiresAt: { $ne: null } },
      { expiresAt: null, updatedAt: now },
    );
  }
}
