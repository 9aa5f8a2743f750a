import { LockMode, type FilterQuery } from '@mikro-orm/core';
import { lockOwner } from '../../access/owned-resources.js';
import { User } from '../../access/user.entity.js';
import type { ListCountSpec } from '../../db/list-counts.js';
import type { Database, Em } from '../../db/orm.js';
import { findPage } from '../../db/pagination.js';
import { epochMs, findRawPage, fromEpochMs as ms, type RawPageSpec } from '../../db/raw-page.js';
import type { EventDefinition } from '../../events/define-event.js';
import { recordEvent } from '../../events/record-event.js';
import type { JobRef } from '../../jobs/queue.js';
import type { AppDeps } from '../../kit/deps.js';
import { assertWithinPlan } from '../../kit/plan-limit.js';
import type { UsagePeriod } from '../../kit/usage.js';
import type { PageRequest } from '../../lib/pagination.js';
import {
  BACKUP_STATUSES,
  BACKUP_TYPES,
  DATABASE_ENGINES,
  DATABASE_REGIONS,
  DATABASE_STATUSES,
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
 * Every query of the databases module (docs/adding-a-module.md): services and jobs reach their rows only through a
 * `DatabasesStore` (`deps.modules.databases.repository.on(em)`), so that they can be run against the in-memory one
 * of the unit tests (tests/modules/databases/in-memory-databases.repository.ts) as well as against the database.
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

/** Reads outside a transaction. */
export interface DatabasesReads {
  /** One page of the databases matching `filter` (scoped already: access/scope.ts), newest first, with the total. */
  databasePage(
    filter: Record<string, unknown>,
    page: PageRequest,
  ): Promise<{ items: DatabaseView[]; total: number; hasMore: boolean }>;
  /** The database `id` within `scope`, not removed. */
  findDatabase(scope: DatabaseScope, id: string): Promise<ManagedDatabase | null>;
  /** The database `id` not removed (jobs). */
  findLiveDatabase(id: string): Promise<ManagedDatabase | null>;
  /** A page of a database's backups, newest first; `filter`: `type`, `status`. */
  backupPage(
    databaseId: string,
    filter: { type?: string | undefined; status?: string | undefined },
    page: PageRequest,
  ): Promise<{ items: DatabaseBackup[]; total: number; hasMore: boolean }>;
  findPendingBackup(id: string): Promise<DatabaseBackup | null>;
  /** The newest final backup of a database. */
  latestFinalBackup(databaseId: string): Promise<DatabaseBackup | null>;
  /** Ids of the `deleting` databases whose removal is due at `now`. */
  deletionsDue(now: Date, limit: number): Promise<{ id: string }[]>;
  /** `creating` or `resizing` databases unchanged since before `before`. */
  stuckTransitions(before: Date, limit: number): Promise<{ id: string; generation: number }[]>;
  /** `pending` backups created before `before`. */
  overdueBackups(before: Date, limit: number): Promise<{ id: string }[]>;
  /** The `running` databases on real servers (the storage check). */
  runningOnServers(limit: number): Promise<ManagedDatabase[]>;
}

/** One transaction: the reads that lock, the writes, and what commits with them (events, jobs). */
export interface DatabasesTx {
  /** The user's row, shared-locked (a deleted user cannot create); 401 when gone. */
  lockOwner(userId: string): Promise<void>;
  /** 402 when the organization's plan has no room for one more database (locks the organization). */
  assertWithinPlan(organizationId: string): Promise<void>;
  /** The database `id` (within `scope` when given), not removed, locked for update. */
  lockDatabase(
    id: string,
    scope?: DatabaseScope,
    opts?: { removed?: boolean },
  ): Promise<ManagedDatabase | null>;
  /** A backup of the organization. */
  findBackup(id: string, organizationId: string): Promise<DatabaseBackup | null>;
  /** A backup locked for update, read again from the store. */
  lockBackup(id: string): Promise<DatabaseBackup | null>;
  /** Every backup of a database, oldest first, locked for update. */
  lockBackupsOf(databaseId: string): Promise<DatabaseBackup[]>;
  /** Backups expired at `now`, locked for update. */
  lockExpiredBackups(now: Date, limit: number): Promise<DatabaseBackup[]>;
  /** A database by id, removed or not. */
  getDatabase(id: string): Promise<ManagedDatabase>;
  /** Whether `name` is taken in the organization by a database not removed. */
  nameTaken(organizationId: string, name: string): Promise<boolean>;
  /** How many databases (not removed) each of `servers` holds. */
  databasesPerServer(servers: string[]): Promise<Map<string, number>>;
  createDatabase(fields: NewDatabase): ManagedDatabase;
  createBackup(fields: NewBackup): DatabaseBackup;
  removeBackup(b: DatabaseBackup): void;
  /** Starts a billable period of the database at its current size. */
  openUsagePeriod(d: ManagedDatabase, now: Date): void;
  /** Ends the database's open billable period, if any. */
  closeUsagePeriod(databaseId: string, now: Date): Promise<void>;
  /** Automatic backups expire `days` after their creation, those taken already included. */
  setAutomaticBackupExpiry(databaseId: string, days: number, now: Date): Promise<void>;
  /** The final backups of a database no longer expire (a canceled deletion). */
  keepFinalBackups(databaseId: string, now: Date): Promise<void>;
  /** Records an event in the transaction (the outbox). */
  recordEvent<T>(event: EventDefinition<T>, object: NoInfer<T>, organizationId: string, now: Date): void;
  /** Queues a job in the transaction; what wakes its worker when due (call it after the commit). */
  queue<T extends object>(job: JobRef<T>, data: T, delayMs: number): Promise<() => void>;
}

export interface DatabasesStore extends DatabasesReads {
  transaction<T>(fn: (tx: DatabasesTx) => Promise<T>): Promise<T>;
}

export interface DatabasesRepository {
  /** The store seen through `em` (a request's, so that its audit context holds; or a job's fork). */
  on(em: Em): DatabasesStore;
  /** The store through a new EntityManager (jobs). */
  fresh(): DatabasesStore;
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

/** The reads, on `em`. */
class MikroReads implements DatabasesReads {
  constructor(
    protected readonly em: Em,
    protected readonly deps: AppDeps,
  ) {}

  databasePage(filter: Record<string, unknown>, page: PageRequest) {
    return findDatabasePage(this.em, this.deps.db, filter, page);
  }

  findDatabase(scope: DatabaseScope, id: string) {
    return this.em.findOne(ManagedDatabase, { id, removedAt: null, ...scope });
  }

  findLiveDatabase(id: string) {
    return this.em.findOne(ManagedDatabase, { id, removedAt: null });
  }

  async backupPage(
    databaseId: string,
    filter: { type?: string | undefined; status?: string | undefined },
    page: PageRequest,
  ) {
    const where: Record<string, string> = { database: databaseId };
    if (filter.type) where.type = filter.type;
    if (filter.status) where.status = filter.status;
    return findPage(this.em, DatabaseBackup, where as FilterQuery<DatabaseBackup>, page, {
      counted: { spec: BACKUP_COUNTS, filter: where },
    });
  }

  findPendingBackup(id: string) {
    return this.em.findOne(DatabaseBackup, { id, status: 'pending' });
  }

  latestFinalBackup(databaseId: string) {
    return this.em.findOne(
      DatabaseBackup,
      { database: databaseId, type: 'final' },
      { orderBy: { createdAt: 'desc', id: 'desc' } },
    );
  }

  deletionsDue(now: Date, limit: number) {
    return this.em.find(
      ManagedDatabase,
      { status: 'deleting', removedAt: null, deletionScheduledAt: { $lte: now } },
      { fields: ['id'], limit },
    );
  }

  stuckTransitions(before: Date, limit: number) {
    return this.em.find(
      ManagedDatabase,
      { status: { $in: ['creating', 'resizing'] }, removedAt: null, updatedAt: { $lt: before } },
      { fields: ['id', 'generation'], limit },
    );
  }

  overdueBackups(before: Date, limit: number) {
    return this.em.find(
      DatabaseBackup,
      { status: 'pending', createdAt: { $lt: before } },
      { fields: ['id'], limit },
    );
  }

  runningOnServers(limit: number) {
    return this.em.find(
      ManagedDatabase,
      { server: { $ne: null }, status: 'running', removedAt: null },
      { limit },
    );
  }
}

class MikroTx implements DatabasesTx {
  constructor(
    private readonly tx: Em,
    private readonly deps: AppDeps,
  ) {}

  lockOwner(userId: string) {
    return lockOwner(this.tx, userId);
  }

  assertWithinPlan(organizationId: string) {
    return assertWithinPlan(this.tx, this.deps, organizationId, 'databases');
  }

  lockDatabase(id: string, scope: DatabaseScope = {}, opts: { removed?: boolean } = {}) {
    return this.tx.findOne(
      ManagedDatabase,
      { id, ...(opts.removed ? {} : { removedAt: null }), ...scope },
      FOR_UPDATE,
    );
  }

  findBackup(id: string, organizationId: string) {
    return this.tx.findOne(DatabaseBackup, { id, organization: organizationId });
  }

  lockBackup(id: string) {
    return this.tx.findOne(DatabaseBackup, { id }, { ...FOR_UPDATE, refresh: true });
  }

  lockBackupsOf(databaseId: string) {
    return this.tx.find(
      DatabaseBackup,
      { database: databaseId },
      { ...FOR_UPDATE, orderBy: { createdAt: 'asc', id: 'asc' } },
    );
  }

  lockExpiredBackups(now: Date, limit: number) {
    return this.tx.find(DatabaseBackup, { expiresAt: { $lte: now } }, { limit, ...FOR_UPDATE });
  }

  getDatabase(id: string) {
    return this.tx.findOneOrFail(ManagedDatabase, id);
  }

  async nameTaken(organizationId: string, name: string) {
    return (
      (await this.tx.count(ManagedDatabase, { organization: organizationId, name, removedAt: null })) > 0
    );
  }

  async databasesPerServer(servers: string[]) {
    const counts = await this.tx.execute<{ server: string; n: string | number }[]>(
      `select server, count(*) as n from ${DATABASES_TABLES.databases}
        where removed_at is null and server in (${servers.map(() => '?').join(', ')}) group by server`,
      servers,
    );
    return new Map(counts.map((r) => [r.server, Number(r.n)]));
  }

  createDatabase({ organizationId, userId, ...fields }: NewDatabase) {
    return this.tx.create(ManagedDatabase, {
      ...fields,
      organization: organizationId,
      user: this.tx.getReference(User, userId),
    });
  }

  createBackup(fields: NewBackup) {
    return this.tx.create(DatabaseBackup, { ...fields, organization: fields.database.organization });
  }

  removeBackup(b: DatabaseBackup) {
    this.tx.remove(b);
  }

  openUsagePeriod(d: ManagedDatabase, now: Date) {
    this.tx.create(DatabaseUsagePeriod, {
      organization: d.organization,
      database: d,
      size: d.size,
      startedAt: now,
      endedAt: null,
    });
  }

  async closeUsagePeriod(databaseId: string, now: Date) {
    await this.tx.nativeUpdate(
      DatabaseUsagePeriod,
      { database: databaseId, endedAt: null },
      { endedAt: now },
    );
  }

  async setAutomaticBackupExpiry(databaseId: string, days: number, now: Date) {
    await this.tx.execute(
      `update ${DATABASES_TABLES.backups} set expires_at = created_at + ? * interval '1 day', updated_at = ?
        where database_id = ? and type = 'automatic'`,
      [days, now, databaseId],
    );
  }

  async keepFinalBackups(databaseId: string, now: Date) {
    await this.tx.nativeUpdate(
      DatabaseBackup,
      { database: databaseId, type: 'final', expiresAt: { $ne: null } },
      { expiresAt: null, updatedAt: now },
    );
  }

  recordEvent<T>(event: EventDefinition<T>, object: NoInfer<T>, organizationId: string, now: Date) {
    recordEvent(this.tx, event, object, organizationId, now);
  }

  async queue<T extends object>(job: JobRef<T>, data: T, delayMs: number) {
    await this.deps.jobs.send(job, data, { em: this.tx, delayMs });
    return () => {
      this.deps.jobs.notify(job.name, delayMs);
    };
  }
}

class MikroStore extends MikroReads implements DatabasesStore {
  transaction<T>(fn: (tx: DatabasesTx) => Promise<T>): Promise<T> {
    return this.em.transactional((tx) => fn(new MikroTx(tx, this.deps)));
  }
}

/** The repository on the API's database (MikroORM). */
export function mikroDatabasesRepository(deps: AppDeps): DatabasesRepository {
  return {
    on: (em) => new MikroStore(em, deps),
    fresh: () => new MikroStore(deps.db.orm.em.fork(), deps),
  };
}
