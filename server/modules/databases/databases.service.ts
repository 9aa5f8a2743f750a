import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import { randomInt } from 'node:crypto';
import { actsOnWholeOrganization, ownedBy, ownedListFilter } from '../../access/scope.js';
import type { Em } from '../../db/orm.js';
import type { ActorContext, AppDeps, ServiceContext } from '../../kit/deps.js';
import { assertWithinPlan } from '../../kit/plan-limit.js';
import { sha256Hex } from '../../lib/crypto.js';
import {
  conflict,
  noServerCapacity,
  notFound,
  serviceUnavailable,
  unsupportedPlacement,
  validation,
  type AppError,
} from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import { iso } from '../../lib/time.js';
import {
  DAY_MS,
  DEFAULT_BACKUP_RETENTION_DAYS,
  DEFAULT_VERSIONS,
  FINAL_BACKUP_KEPT_DAYS,
  SIZE_SPECS,
  type DatabaseEngine,
  type DatabaseRegion,
  type DatabaseSize,
} from './databases.constants.js';
import type { DatabaseDriver, Placement } from './databases.driver.js';
import { instanceOf, metricsOf, toDatabaseDetailDto, toDatabaseDto } from './databases.dto.js';
import { databaseCreated, databaseDeleted, databaseUpdated } from './databases.events.js';
import { databasesReadyJob, databasesRemoveJob } from './databases.jobs.js';
import {
  queueJob,
  scheduleAutomaticBackups,
  startBackup,
  stopAutomaticBackups,
} from './databases-lifecycle.service.js';
import { transition } from './database-state.js';
import type {
  TCreateDatabaseInput,
  TDatabaseActionInput,
  TDatabaseIdInput,
  TDatabaseOutput,
  TDeleteDatabaseOutput,
  TListDatabasesInput,
  TListDatabasesOutput,
  TResetPasswordOutput,
  TUpdateDatabaseInput,
} from './databases.schema.js';
import type { DatabaseBackup } from './database-backup.entity.js';
import type { ManagedDatabase } from './database.entity.js';

export function databaseNotFound(): AppError {
  return notFound('Database');
}

/**
 * The caller's database `id`: removed ones, another tenant's or (for members) another user's are not found.
 */
export async function findDatabase(ctx: ActorContext, id: string): Promise<ManagedDatabase> {
  if (!isId('db', id)) throw databaseNotFound();
  const d = await repositoryOf(ctx.deps, 'databases').findDatabase(ctx.em, ownedBy(ctx.actor), id);
  if (!d) throw databaseNotFound();
  return d;
}

/** Loads the caller's database `id` locked for update in `tx`, or throws NOT_FOUND. */
export async function lockDatabase(ctx: ActorContext, tx: Em, id: string): Promise<ManagedDatabase> {
  if (!isId('db', id)) throw databaseNotFound();
  const d = await repositoryOf(ctx.deps, 'databases').lockDatabase(tx, id, ownedBy(ctx.actor));
  if (!d) throw databaseNotFound();
  return d;
}

/**
 * A change of one of the caller's databases: `change` runs on it, locked, in a transaction; `database.updated` is
 * recorded when it returns true. The detail view after it.
 */
async function changeDatabase(
  ctx: ActorContext,
  id: string,
  change: (tx: Em, d: ManagedDatabase, now: Date) => Promise<boolean>,
): Promise<ManagedDatabase> {
  const { deps } = ctx;
  const repo = repositoryOf(ctx.deps, 'databases');
  const driver = runtimeOf(deps, 'databases').driver;
  const database = await repo.transaction(ctx.em, async (tx) => {
    const now = deps.clock.now();
    const d = await lockDatabase(ctx, tx, id);
    if (await change(tx, d, now)) {
      d.updatedAt = now;
      repo.recordEvent(
        tx,
        databaseUpdated,
        toDatabaseDetailDto(d, await metricsOf(d, driver, now)),
        d.organization.id,
        now,
      );
    }
    return d;
  });
  return database;
}

/** The detail view of `d` now (with `password` when one was just made). */
async function detailOf(deps: AppDeps, d: ManagedDatabase, password?: string) {
  return toDatabaseDetailDto(
    d,
    await metricsOf(d, runtimeOf(deps, 'databases').driver, deps.clock.now()),
    password,
  );
}

const PASSWORD_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** 32 letters and digits (about 190 bits): safe in a URL as it is. */
function generatePassword(): string {
  let out = '';
  for (let i = 0; i < 32; i++) out += PASSWORD_ALPHABET[randomInt(PASSWORD_ALPHABET.length)];
  return out;
}

/** `8.4` > `8.0`, `17` > `14`. */
const versionNumber = (v: string) => Number.parseFloat(v);

export async function listDatabases(
  ctx: ActorContext,
  input: TListDatabasesInput,
): Promise<TListDatabasesOutput> {
  const { actor } = ctx;
  // Owners and admins see the organization's databases (or one user's); members see their own.
  const where: Record<string, unknown> = actsOnWholeOrganization(actor)
    ? { organization: actor.organizationId, ...(input.user_id ? { user: input.user_id } : {}) }
    : ownedListFilter(actor, { userId: input.user_id });
  if (input.engine) where.engine = input.engine;
  if (input.status) where.status = input.status;
  if (input.region) where.region = input.region;
  const request = pageRequest(input);
  const found = await repositoryOf(ctx.deps, 'databases').databasePage(ctx.em, where, request);
  const driver = runtimeOf(ctx.deps, 'databases').driver;
  const now = ctx.deps.clock.now();
  return {
    success: true,
    databases: await Promise.all(
      found.items.map(async (d) => toDatabaseDto(d, await metricsOf(d, driver, now))),
    ),
    ...pageFields(request, found),
  };
}

export async function getDatabase(ctx: ActorContext, input: TDatabaseIdInput): Promise<TDatabaseOutput> {
  const d = await findDatabase(ctx, input.id);
  return { success: true, database: await detailOf(ctx.deps, d) };
}

const noSuchBackup = () => validation('backup_id', 'No such backup in this organization');

/**
 * The backup a new database is made from: a backup of the organization (for members, of one of their databases),
 * not expired. Unknown, another organization's or expired → 400 (the field names nothing that can be used);
 * not `completed`, or of another engine → 409.
 */
async function restorableBackup(
  ctx: ActorContext,
  tx: Em,
  backupId: string,
  engine: DatabaseEngine,
  now: Date,
): Promise<{ backup: DatabaseBackup; source: ManagedDatabase }> {
  const { actor } = ctx;
  const repo = repositoryOf(ctx.deps, 'databases');
  if (!isId('backup', backupId)) throw noSuchBackup();
  const backup = await repo.findBackup(tx, backupId, actor.organizationId);
  if (!backup || (backup.expiresAt && backup.expiresAt <= now)) throw noSuchBackup();
  const source = await repo.getDatabase(tx, backup.database.id);
  if (!actsOnWholeOrganization(actor) && source.user.id !== actor.userId) throw noSuchBackup();
  if (backup.status !== 'completed') {
    throw conflict(`Backup ${backup.id} is ${backup.status}: only a completed backup can be restored`);
  }
  if (source.engine !== engine) {
    throw conflict(
      `Backup ${backup.id} is of a ${source.engine} database; a ${engine} database cannot use it`,
      [{ path: 'engine', message: `Must be ${source.engine} to restore this backup` }],
    );
  }
  return { backup, source };
}

/**
 * 402 `PLAN_LIMIT_EXCEEDED` when the organization's plan has no room for one more database (kit/plan-limit.ts):
 * the plan under a share lock, and the count after the organization's creates of databases queue, so that they are
 * checked one after the other.
 */
async function assertRoomForDatabase(ctx: ServiceContext, tx: Em, organizationId: string): Promise<void> {
  const repo = repositoryOf(ctx.deps, 'databases');
  await assertWithinPlan(await repo.lockPlan(tx, organizationId), 'databases', () =>
    repo.lockedDatabaseCount(tx, ctx.deps, organizationId),
  );
}

export async function createDatabase(
  ctx: ActorContext,
  input: TCreateDatabaseInput,
): Promise<TDatabaseOutput> {
  const { actor, deps } = ctx;
  const driver = runtimeOf(deps, 'databases').driver;
  // Leaves this function only inside the create response; the database keeps its hash.
  const password = generatePassword();
  const repo = repositoryOf(ctx.deps, 'databases');

  const database = await repo.transaction(ctx.em, async (tx) => {
    const now = deps.clock.now();
    await repo.lockOwner(tx, actor.userId);
    // Locks the organization: concurrent creates (and name checks) of one organization run one after the other.
    await assertRoomForDatabase(ctx, tx, actor.organizationId);
    const from = input.backup_id
      ? await restorableBackup(ctx, tx, input.backup_id, input.engine, now)
      : undefined;
    if (await repo.nameTaken(tx, actor.organizationId, input.name)) {
      throw conflict(
        `A database named ${input.name} already exists in this organization: choose another name`,
        [{ path: 'name', message: 'Already in use' }],
      );
    }
    const version = input.version ?? from?.source.version ?? DEFAULT_VERSIONS[input.engine];
    if (from && versionNumber(version) < versionNumber(from.source.version)) {
      throw conflict(
        `Backup ${from.backup.id} is of ${input.engine} ${from.source.version}: it cannot be restored into the ` +
          `older version ${version}`,
        [{ path: 'version', message: `Must be ${from.source.version} or newer` }],
      );
    }
    const size = input.size ?? from?.source.size ?? 'small';
    const region = input.region ?? from?.source.region ?? 'us-east';
    const id = newId('db');
    const place = await placeDatabase(ctx, tx, driver, {
      id,
      name: input.name,
      engine: input.engine,
      region,
      size,
    });
    if (from && place.server && !from.source.server) {
      throw conflict(
        `Backup ${from.backup.id} is of a simulated database: it holds no data to restore into a real one`,
      );
    }
    const d = repo.createDatabase(tx, {
      id,
      createdAt: now,
      updatedAt: now,
      organizationId: actor.organizationId,
      userId: actor.userId,
      name: input.name,
      engine: input.engine,
      version,
      size,
      region,
      status: 'creating',
      backupEnabled: input.backup_enabled ?? true,
      multiAz: input.multi_az ?? false,
      backupRetention: input.backup_retention ?? DEFAULT_BACKUP_RETENTION_DAYS,
      host: place.host,
      port: place.server ? place.port : null,
      server: place.server,
      sslRequired: place.server ? false : true,
      readOnly: false,
      statusReason: null,
      dbName: place.dbName,
      dbUser: place.dbUser,
      passwordHash: sha256Hex(password),
      generation: 1,
      backupSchedule: 0,
      nextBackupAt: null,
      lastBackupAt: null,
      deletionScheduledAt: null,
      removedAt: null,
      restoredFromBackupId: from?.backup.id ?? null,
    });
    const op = await driver.provision(instanceOf(d), { fromBackupId: from?.backup.id });
    // A real server's login is created by the job, from the password's verifier (the password is never stored).
    const verifier = d.server ? driver.passwordVerifier(d.engine, password) : undefined;
    repo.openUsagePeriod(tx, d, now);
    await queueJob(
      ctx,
      tx,
      databasesReadyJob,
      { database_id: d.id, generation: 1, ...(verifier ? { verifier } : {}) },
      op.readyInMs,
    );
    if (d.backupEnabled) await scheduleAutomaticBackups(ctx, tx, { database: d, now });
    repo.recordEvent(
      tx,
      databaseCreated,
      toDatabaseDetailDto(d, await metricsOf(d, driver, now)),
      actor.organizationId,
      now,
    );
    return d;
  });
  return { success: true, database: await detailOf(deps, database, password) };
}

/**
 * Where a new database goes: among the driver's places for its engine and region, the server holding the fewest
 * databases (not removed) that has connections left for its size (docs/databases.md, "Capacity of a server"). None
 * → 409 UNSUPPORTED_PLACEMENT: with DATABASE_HOSTS set, an engine or region without a server is refused, never
 * simulated; servers all full → 503 NO_SERVER_CAPACITY.
 */
async function placeDatabase(
  ctx: ServiceContext,
  tx: Em,
  driver: DatabaseDriver,
  spec: { id: string; name: string; engine: DatabaseEngine; region: DatabaseRegion; size: DatabaseSize },
): Promise<Placement> {
  const places = driver.placements(spec);
  if (!places.length) {
    throw unsupportedPlacement(
      `No ${spec.engine} server takes new databases in ${spec.region}: choose another engine or region`,
      [{ path: 'engine', message: `No ${spec.engine} server in ${spec.region}` }],
    );
  }
  if (!places[0]!.server) return places[0]!;
  const load = await repositoryOf(ctx.deps, 'databases').serverLoad(
    tx,
    places.map((p) => p.server!),
  );
  const needed = SIZE_SPECS[spec.size].maxConnections;
  const open: Placement[] = [];
  for (const p of places) {
    const capacity = driver.connectionCapacity ? await driver.connectionCapacity(p.server!) : null;
    if (capacity === null || (load.get(p.server!)?.connections ?? 0) + needed <= capacity) open.push(p);
  }
  if (!open.length) throw noRoom(spec.engine, spec.region, spec.size);
  const held = (p: Placement) => load.get(p.server!)?.databases ?? 0;
  return open.reduce((best, p) => (held(p) < held(best) ? p : best));
}

function noRoom(engine: DatabaseEngine, region: DatabaseRegion, size: DatabaseSize): AppError {
  return noServerCapacity(
    `No ${engine} server in ${region} has room for the ${SIZE_SPECS[size].maxConnections} connections of a ` +
      `${size} database: try a smaller size or another region, or later`,
    [{ path: 'size', message: `No ${engine} server in ${region} has room for it` }],
  );
}

/** A real database grows only into connections its server has left (docs/databases.md, "Capacity of a server"). */
async function assertRoomToResize(
  ctx: ServiceContext,
  tx: Em,
  driver: DatabaseDriver,
  d: ManagedDatabase,
  size: DatabaseSize,
): Promise<void> {
  const grows = SIZE_SPECS[size].maxConnections - SIZE_SPECS[d.size].maxConnections;
  if (!d.server || grows <= 0 || !driver.connectionCapacity) return;
  const load = await repositoryOf(ctx.deps, 'databases').serverLoad(tx, [d.server]);
  const capacity = await driver.connectionCapacity(d.server);
  if (capacity !== null && (load.get(d.server)?.connections ?? 0) + grows > capacity) {
    throw noRoom(d.engine, d.region, size);
  }
}

function notWhile(status: string, action: string): AppError {
  return conflict(`The database is ${status}: ${action}`);
}

export async function updateDatabase(
  ctx: ActorContext,
  input: TUpdateDatabaseInput,
): Promise<TDatabaseOutput> {
  const { deps } = ctx;
  const repo = repositoryOf(ctx.deps, 'databases');
  const driver = runtimeOf(deps, 'databases').driver;
  const database = await changeDatabase(ctx, input.id, async (tx, d, now) => {
    if (d.status !== 'running') throw notWhile(d.status, 'it can be changed only while running');
    let changed = false;
    if (input.size !== undefined && input.size !== d.size) {
      await assertRoomToResize(ctx, tx, driver, d, input.size);
      const op = await driver.resize(instanceOf(d), input.size);
      // Billed at the new size from now on.
      await repo.closeUsagePeriod(tx, d.id, now);
      d.size = input.size;
      repo.openUsagePeriod(tx, d, now);
      transition(d, 'resizing', now);
      d.generation += 1;
      await queueJob(
        ctx,
        tx,
        databasesReadyJob,
        { database_id: d.id, generation: d.generation },
        op.readyInMs,
      );
      changed = true;
    }
    if (input.backup_retention !== undefined && input.backup_retention !== d.backupRetention) {
      d.backupRetention = input.backup_retention;
      // Automatic backups expire `backup_retention` days after their creation, the ones taken already included.
      await repo.setAutomaticBackupExpiry(tx, d.id, input.backup_retention, now);
      changed = true;
    }
    if (input.backup_enabled !== undefined && input.backup_enabled !== d.backupEnabled) {
      d.backupEnabled = input.backup_enabled;
      if (d.backupEnabled) await scheduleAutomaticBackups(ctx, tx, { database: d, now });
      else stopAutomaticBackups(d);
      changed = true;
    }
    return changed;
  });
  return { success: true, database: await detailOf(deps, database) };
}

export async function deleteDatabase(
  ctx: ActorContext,
  input: TDatabaseIdInput,
): Promise<TDeleteDatabaseOutput> {
  const { deps } = ctx;
  const driver = runtimeOf(deps, 'databases').driver;
  const graceMs = deps.config.databases.deletionGraceMs;
  const repo = repositoryOf(ctx.deps, 'databases');
  const { database, finalBackup } = await repo.transaction(ctx.em, async (tx) => {
    const now = deps.clock.now();
    const d = await lockDatabase(ctx, tx, input.id);
    if (d.status === 'deleting') {
      throw conflict(
        `The database is already being deleted (removal at ${iso(d.deletionScheduledAt)}); ` +
          'POST /databases/{id}/cancel-deletion keeps it',
      );
    }
    const scheduled = new Date(now.getTime() + graceMs);
    transition(d, 'deleting', now);
    d.generation += 1;
    d.deletionScheduledAt = scheduled;
    stopAutomaticBackups(d);
    // Neither counted against the plan nor billed while it waits for removal.
    await repo.closeUsagePeriod(tx, d.id, now);
    const final = await startBackup(ctx, tx, {
      database: d,
      type: 'final',
      now,
      description: 'Taken when the deletion of the database was requested',
      expiresAt: new Date(scheduled.getTime() + FINAL_BACKUP_KEPT_DAYS * DAY_MS),
    });
    await queueJob(ctx, tx, databasesRemoveJob, { database_id: d.id, generation: d.generation }, graceMs);
    repo.recordEvent(
      tx,
      databaseDeleted,
      toDatabaseDetailDto(d, await metricsOf(d, driver, now)),
      d.organization.id,
      now,
    );
    return { database: d, finalBackup: final };
  });
  return {
    success: true,
    message: `Deletion of database ${database.name} initiated: a final backup is being taken, and the database will be removed at ${iso(database.deletionScheduledAt)} unless the deletion is canceled`,
    id: database.id,
    final_backup: finalBackup.id,
    deletion_scheduled: iso(database.deletionScheduledAt)!,
  };
}

export async function cancelDeletion(
  ctx: ActorContext,
  input: TDatabaseActionInput,
): Promise<TDatabaseOutput> {
  const { deps } = ctx;
  const repo = repositoryOf(ctx.deps, 'databases');
  const database = await changeDatabase(ctx, input.id, async (tx, d, now) => {
    if (d.status !== 'deleting') throw notWhile(d.status, 'there is no deletion to cancel');
    // It counts against the plan again: 402 when the plan has no room for it any more.
    await assertRoomForDatabase(ctx, tx, d.organization.id);
    transition(d, 'running', now);
    d.generation += 1;
    d.deletionScheduledAt = null;
    repo.openUsagePeriod(tx, d, now);
    // The final backup is kept like a manual one.
    await repo.keepFinalBackups(tx, d.id, now);
    if (d.backupEnabled) await scheduleAutomaticBackups(ctx, tx, { database: d, now });
    return true;
  });
  return { success: true, database: await detailOf(deps, database) };
}

export async function resetPassword(
  ctx: ActorContext,
  input: TDatabaseActionInput,
): Promise<TResetPasswordOutput> {
  const { deps } = ctx;
  const driver = runtimeOf(deps, 'databases').driver;
  const password = generatePassword();
  const database = await changeDatabase(ctx, input.id, async (_tx, d) => {
    if (d.status === 'deleting') throw notWhile(d.status, 'cancel the deletion first');
    if (d.server && d.status !== 'running' && d.status !== 'resizing') {
      throw notWhile(d.status, 'its password can be reset once it is running');
    }
    try {
      await driver.setPassword(instanceOf(d), password);
    } catch (err) {
      deps.log.warn({ database_id: d.id, err: (err as Error).message }, 'database password reset failed');
      throw serviceUnavailable(
        'The database server did not answer; the password is unchanged. Try again shortly',
      );
    }
    d.passwordHash = sha256Hex(password);
    return true;
  });
  return { success: true, database: await detailOf(deps, database, password), password };
}
