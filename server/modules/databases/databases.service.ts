import { randomInt } from 'node:crypto';
import type { Actor } from '../../access/actor.js';
import { actsOnWholeOrganization, ownedBy, ownedListFilter } from '../../access/scope.js';
import type { Em } from '../../db/orm.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import { sha256Hex } from '../../lib/crypto.js';
import {
  conflict,
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
  type DatabaseEngine,
  type DatabaseRegion,
} from './databases.constants.js';
import type { DatabaseDriver, Placement } from './databases.driver.js';
import { instanceOf, metricsOf, toDatabaseDetailDto, toDatabaseDto } from './databases.dto.js';
import { databaseCreated, databaseDeleted, databaseUpdated } from './databases.events.js';
import {
  databasesReadyJob,
  databasesRemoveJob,
  runAll,
  scheduleAutomaticBackups,
  startBackup,
  stopAutomaticBackups,
  type AfterCommit,
} from './databases.jobs.js';
import type { DatabasesStore, DatabasesTx } from './databases.repository.js';
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

/** The module's store seen through the request's EntityManager (databases.repository.ts). */
export function storeOf(ctx: { em: Em; deps: AppDeps }): DatabasesStore {
  return ctx.deps.modules.databases.repository.on(ctx.em);
}

export function databaseNotFound(): AppError {
  return notFound('Database');
}

/**
 * The caller's database `id`: removed ones, another tenant's or (for members) another user's are not found.
 */
export async function findDatabase(
  store: DatabasesStore,
  actor: Actor,
  id: string,
): Promise<ManagedDatabase> {
  if (!isId('db', id)) throw databaseNotFound();
  const d = await store.findDatabase(ownedBy(actor), id);
  if (!d) throw databaseNotFound();
  return d;
}

/** Loads the caller's database `id` locked for update, or throws NOT_FOUND. */
export async function lockDatabase(tx: DatabasesTx, actor: Actor, id: string): Promise<ManagedDatabase> {
  if (!isId('db', id)) throw databaseNotFound();
  const d = await tx.lockDatabase(id, ownedBy(actor));
  if (!d) throw databaseNotFound();
  return d;
}

/**
 * A change of one of the caller's databases: `change` runs on it, locked, in a transaction; `database.updated` is
 * recorded when it returns true; the jobs it queued are woken after the commit. The detail view after it.
 */
async function changeDatabase(
  ctx: ActorContext,
  id: string,
  change: (tx: DatabasesTx, d: ManagedDatabase, now: Date, after: AfterCommit[]) => Promise<boolean>,
): Promise<ManagedDatabase> {
  const { deps } = ctx;
  const driver = deps.modules.databases.driver;
  const after: AfterCommit[] = [];
  const database = await storeOf(ctx).transaction(async (tx) => {
    const now = deps.clock.now();
    const d = await lockDatabase(tx, ctx.actor, id);
    if (await change(tx, d, now, after)) {
      d.updatedAt = now;
      tx.recordEvent(
        databaseUpdated,
        toDatabaseDetailDto(d, await metricsOf(d, driver, now)),
        d.organization.id,
        now,
      );
    }
    return d;
  });
  runAll(after);
  return database;
}

/** The detail view of `d` now (with `password` when one was just made). */
async function detailOf(deps: AppDeps, d: ManagedDatabase, password?: string) {
  return toDatabaseDetailDto(
    d,
    await metricsOf(d, deps.modules.databases.driver, deps.clock.now()),
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
  const found = await storeOf(ctx).databasePage(where, request);
  const driver = ctx.deps.modules.databases.driver;
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
  const d = await findDatabase(storeOf(ctx), ctx.actor, input.id);
  return { success: true, database: await detailOf(ctx.deps, d) };
}

const noSuchBackup = () => validation('backup_id', 'No such backup in this organization');

/**
 * The backup a new database is made from: a backup of the organization (for members, of one of their databases),
 * not expired. Unknown, another organization's or expired → 400 (the field names nothing that can be used);
 * not `completed`, or of another engine → 409.
 */
async function restorableBackup(
  tx: DatabasesTx,
  actor: Actor,
  backupId: string,
  engine: DatabaseEngine,
  now: Date,
): Promise<{ backup: DatabaseBackup; source: ManagedDatabase }> {
  if (!isId('backup', backupId)) throw noSuchBackup();
  const backup = await tx.findBackup(backupId, actor.organizationId);
  if (!backup || (backup.expiresAt && backup.expiresAt <= now)) throw noSuchBackup();
  const source = await tx.getDatabase(backup.database.id);
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

export async function createDatabase(
  ctx: ActorContext,
  input: TCreateDatabaseInput,
): Promise<TDatabaseOutput> {
  const { actor, deps } = ctx;
  const driver = deps.modules.databases.driver;
  // Leaves this function only inside the create response; the database keeps its hash.
  const password = generatePassword();
  const after: AfterCommit[] = [];

  const database = await storeOf(ctx).transaction(async (tx) => {
    const now = deps.clock.now();
    await tx.lockOwner(actor.userId);
    // Locks the organization: concurrent creates (and name checks) of one organization run one after the other.
    await tx.assertWithinPlan(actor.organizationId);
    const from = input.backup_id
      ? await restorableBackup(tx, actor, input.backup_id, input.engine, now)
      : undefined;
    if (await tx.nameTaken(actor.organizationId, input.name)) {
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
    const place = await placeDatabase(tx, driver, { id, name: input.name, engine: input.engine, region });
    if (from && place.server && !from.source.server) {
      throw conflict(
        `Backup ${from.backup.id} is of a simulated database: it holds no data to restore into a real one`,
      );
    }
    const d = tx.createDatabase({
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
    tx.openUsagePeriod(d, now);
    after.push(
      await tx.queue(
        databasesReadyJob,
        { database_id: d.id, generation: 1, ...(verifier ? { verifier } : {}) },
        op.readyInMs,
      ),
    );
    if (d.backupEnabled) after.push(await scheduleAutomaticBackups(deps, tx, d, now));
    tx.recordEvent(
      databaseCreated,
      toDatabaseDetailDto(d, await metricsOf(d, driver, now)),
      actor.organizationId,
      now,
    );
    return d;
  });
  runAll(after);
  return { success: true, database: await detailOf(deps, database, password) };
}

/**
 * Where a new database goes: among the driver's places for its engine and region, the server holding the fewest
 * databases (not removed). None → 409 UNSUPPORTED_PLACEMENT: with DATABASE_HOSTS set, an engine or region without
 * a server is refused, never simulated.
 */
async function placeDatabase(
  tx: DatabasesTx,
  driver: DatabaseDriver,
  spec: { id: string; name: string; engine: DatabaseEngine; region: DatabaseRegion },
): Promise<Placement> {
  const places = driver.placements(spec);
  if (!places.length) {
    throw unsupportedPlacement(
      `No ${spec.engine} server takes new databases in ${spec.region}: choose another engine or region`,
      [{ path: 'engine', message: `No ${spec.engine} server in ${spec.region}` }],
    );
  }
  if (places.length === 1) return places[0]!;
  const held = await tx.databasesPerServer(places.map((p) => p.server!));
  return places.reduce((best, p) => ((held.get(p.server!) ?? 0) < (held.get(best.server!) ?? 0) ? p : best));
}

function notWhile(status: string, action: string): AppError {
  return conflict(`The database is ${status}: ${action}`);
}

export async function updateDatabase(
  ctx: ActorContext,
  input: TUpdateDatabaseInput,
): Promise<TDatabaseOutput> {
  const { deps } = ctx;
  const driver = deps.modules.databases.driver;
  const database = await changeDatabase(ctx, input.id, async (tx, d, now, after) => {
    if (d.status !== 'running') throw notWhile(d.status, 'it can be changed only while running');
    let changed = false;
    if (input.size !== undefined && input.size !== d.size) {
      const op = await driver.resize(instanceOf(d), input.size);
      // Billed at the new size from now on.
      await tx.closeUsagePeriod(d.id, now);
      d.size = input.size;
      tx.openUsagePeriod(d, now);
      d.status = 'resizing';
      d.generation += 1;
      after.push(
        await tx.queue(databasesReadyJob, { database_id: d.id, generation: d.generation }, op.readyInMs),
      );
      changed = true;
    }
    if (input.backup_retention !== undefined && input.backup_retention !== d.backupRetention) {
      d.backupRetention = input.backup_retention;
      // Automatic backups expire `backup_retention` days after their creation, the ones taken already included.
      await tx.setAutomaticBackupExpiry(d.id, input.backup_retention, now);
      changed = true;
    }
    if (input.backup_enabled !== undefined && input.backup_enabled !== d.backupEnabled) {
      d.backupEnabled = input.backup_enabled;
      if (d.backupEnabled) after.push(await scheduleAutomaticBackups(deps, tx, d, now));
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
  const { actor, deps } = ctx;
  const driver = deps.modules.databases.driver;
  const graceMs = deps.config.databases.deletionGraceMs;
  const after: AfterCommit[] = [];
  const { database, finalBackup } = await storeOf(ctx).transaction(async (tx) => {
    const now = deps.clock.now();
    const d = await lockDatabase(tx, actor, input.id);
    if (d.status === 'deleting') {
      throw conflict(
        `The database is already being deleted (removal at ${iso(d.deletionScheduledAt)}); ` +
          'POST /databases/{id}/cancel-deletion keeps it',
      );
    }
    const scheduled = new Date(now.getTime() + graceMs);
    d.status = 'deleting';
    d.generation += 1;
    d.deletionScheduledAt = scheduled;
    d.updatedAt = now;
    stopAutomaticBackups(d);
    // Neither counted against the plan nor billed while it waits for removal.
    await tx.closeUsagePeriod(d.id, now);
    const final = await startBackup(deps, tx, d, 'final', now, {
      description: 'Taken when the deletion of the database was requested',
      expiresAt: new Date(scheduled.getTime() + FINAL_BACKUP_KEPT_DAYS * DAY_MS),
    });
    after.push(
      final.wake,
      await tx.queue(databasesRemoveJob, { database_id: d.id, generation: d.generation }, graceMs),
    );
    tx.recordEvent(
      databaseDeleted,
      toDatabaseDetailDto(d, await metricsOf(d, driver, now)),
      d.organization.id,
      now,
    );
    return { database: d, finalBackup: final.backup };
  });
  runAll(after);
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
  const database = await changeDatabase(ctx, input.id, async (tx, d, now, after) => {
    if (d.status !== 'deleting') throw notWhile(d.status, 'there is no deletion to cancel');
    // It counts against the plan again: 402 when the plan has no room for it any more.
    await tx.assertWithinPlan(d.organization.id);
    d.status = 'running';
    d.generation += 1;
    d.deletionScheduledAt = null;
    tx.openUsagePeriod(d, now);
    // The final backup is kept like a manual one.
    await tx.keepFinalBackups(d.id, now);
    if (d.backupEnabled) after.push(await scheduleAutomaticBackups(deps, tx, d, now));
    return true;
  });
  return { success: true, database: await detailOf(deps, database) };
}

export async function resetPassword(
  ctx: ActorContext,
  input: TDatabaseActionInput,
): Promise<TResetPasswordOutput> {
  const { deps } = ctx;
  const driver = deps.modules.databases.driver;
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
