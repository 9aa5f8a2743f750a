import type { Em } from '../../db/orm.js';
import type { JobInfo, JobRef } from '../../jobs/queue.js';
import type { ServiceContext } from '../../kit/deps.js';
import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import { newId } from '../../lib/ids.js';
import { transition as moveBackup } from './backup-state.js';
import { transition as moveDatabase } from './database-state.js';
import { DAY_MS, FINAL_BACKUP_KEPT_DAYS, SIZE_SPECS, type BackupType } from './databases.constants.js';
import { PermanentDriverError } from './databases.driver.js';
import { instanceOf, metricsOf, toBackupDto, toDatabaseDetailDto } from './databases.dto.js';
import { databaseBackupCompleted, databaseUpdated } from './databases.events.js';
import {
  databasesAutoBackupJob,
  databasesCompleteBackupJob,
  JOB_RETRY_LIMIT,
  type AutoBackupJobData,
  type TransitionJobData,
} from './databases.jobs.js';
import type { DatabaseBackup } from './database-backup.entity.js';
import type { ManagedDatabase } from './database.entity.js';

/**
 * What the jobs of the databases module do to the data (docs/databases.md, "In the code"): the readiness of a
 * creation or resize, backups (their start, completion and automatic schedule), the removal of a deleted database,
 * and the periodic sweep. The jobs (databases.jobs.ts) call these with a context of their own; the services call
 * {@link startBackup} and {@link scheduleAutomaticBackups} inside their transactions. Every change of status goes
 * through database-state.ts or backup-state.ts.
 *
 * A job's context is a fresh unit of work: each transaction below runs on a fork of its own, so that the rows it
 * locks are read again from the database rather than from what an earlier read of the job left in memory.
 */

/**
 * Queues `job` in the transaction `tx`, due in `delayMs`: it exists exactly when that commits, and not if it rolls
 * back; the queue wakes its workers after the commit (docs/jobs.md, "What the queue layer adds").
 */
export async function queueJob<T extends object>(
  ctx: ServiceContext,
  tx: Em,
  job: JobRef<T>,
  data: NoInfer<T>,
  delayMs: number,
): Promise<void> {
  await ctx.deps.jobs.send(job, data, { em: tx, delayMs });
}

/** A context on a unit of work of its own (a step of the sweep, a transaction after a job's reads). */
const freshContext = (ctx: ServiceContext): ServiceContext => ({
  deps: ctx.deps,
  em: repositoryOf(ctx.deps, 'databases').fork(),
});

// ---------- automatic backups ----------

/** (Re)starts the automatic backups of `database`: the first one `delayMs` (`BACKUP_INTERVAL`) from `now`. */
export async function scheduleAutomaticBackups(
  ctx: ServiceContext,
  tx: Em,
  input: { database: ManagedDatabase; now: Date; delayMs?: number },
): Promise<void> {
  const { database: d, now, delayMs = ctx.deps.config.databases.backupIntervalMs } = input;
  d.backupSchedule += 1;
  d.nextBackupAt = new Date(now.getTime() + delayMs);
  await queueJob(ctx, tx, databasesAutoBackupJob, { database_id: d.id, schedule: d.backupSchedule }, delayMs);
}

/** Stops the automatic backups of `d` (a job already queued finds its schedule outdated and does nothing). */
export function stopAutomaticBackups(d: ManagedDatabase): void {
  d.backupSchedule += 1;
  d.nextBackupAt = null;
}

/**
 * One automatic backup, then the next one queued `BACKUP_INTERVAL` later. A database that is `creating` or
 * `resizing` at that moment gets its backup once the change is done.
 */
export async function runAutomaticBackup(ctx: ServiceContext, input: AutoBackupJobData): Promise<void> {
  const { deps } = ctx;
  const repo = repositoryOf(ctx.deps, 'databases');
  await repo.transaction(ctx.em, async (tx) => {
    const now = deps.clock.now();
    const d = await repo.lockDatabase(tx, input.database_id);
    if (!d || d.backupSchedule !== input.schedule || !d.backupEnabled || d.status === 'deleting') return;
    if (d.status !== 'running') {
      await scheduleAutomaticBackups(ctx, tx, {
        database: d,
        now,
        delayMs: deps.config.provisioningDelayMs + 1000,
      });
      return;
    }
    const retentionMs = d.backupRetention * DAY_MS;
    await startBackup(ctx, tx, {
      database: d,
      type: 'automatic',
      now,
      expiresAt: new Date(now.getTime() + retentionMs),
    });
    await scheduleAutomaticBackups(ctx, tx, { database: d, now });
  });
}

// ---------- backups ----------

const stamp = (d: Date) =>
  d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace('T', '-')
    .replace(/\.\d+Z$/, '');

/** Records a new `pending` backup of `database` in `tx` and queues its completion. */
export async function startBackup(
  ctx: ServiceContext,
  tx: Em,
  input: {
    database: ManagedDatabase;
    type: BackupType;
    now: Date;
    name?: string | undefined;
    description?: string | undefined;
    expiresAt?: Date | null;
  },
): Promise<DatabaseBackup> {
  const { database: d, type, now } = input;
  const id = newId('backup');
  const op = await runtimeOf(ctx.deps, 'databases').driver.startBackup(instanceOf(d), id);
  const backup = repositoryOf(ctx.deps, 'databases').createBackup(tx, {
    id,
    createdAt: now,
    updatedAt: now,
    database: d,
    type,
    status: 'pending',
    name: input.name ?? `${d.name}-${type}-${stamp(now)}`,
    description: input.description ?? null,
    sizeBytes: null,
    completedAt: null,
    expiresAt: input.expiresAt ?? null,
  });
  await queueJob(ctx, tx, databasesCompleteBackupJob, { backup_id: id }, op.readyInMs);
  return backup;
}

/** Whether `job` has attempts left (a job's retries); no job (the sweep, a direct call): none. */
function retriesLeft(job: JobInfo | undefined, limit: number = JOB_RETRY_LIMIT): boolean {
  return job !== undefined && job.retryCount < limit;
}

/** An error's message for the API's records: drivers already leave credentials out; at most 500 characters. */
function reasonOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 500) || 'unknown error';
}

/**
 * `pending` (or a final backup `failed` at the deletion's request, dumped again at the removal) → `completed`, or
 * `pending` → `failed` with `reason`, inside `tx`: `last_backup`, `database.backup.completed`.
 */
function finishBackup(
  ctx: ServiceContext,
  tx: Em,
  b: DatabaseBackup,
  d: ManagedDatabase,
  now: Date,
  result: { sizeBytes: number } | { reason: string },
) {
  b.updatedAt = now;
  if ('reason' in result) {
    moveBackup(b, 'failed', now);
    b.failureReason = result.reason;
    return;
  }
  b.sizeBytes = result.sizeBytes;
  moveBackup(b, 'completed', now);
  b.failureReason = null;
  b.completedAt = now;
  if (!d.lastBackupAt || d.lastBackupAt < now) d.lastBackupAt = now;
  repositoryOf(ctx.deps, 'databases').recordEvent(
    tx,
    databaseBackupCompleted,
    toBackupDto(b, d),
    b.organization.id,
    now,
  );
}

/**
 * The completion job: the driver takes the backup (a real dump: outside any transaction, it can take minutes), then
 * a `pending` backup becomes `completed`, or `failed` with the reason once the job has no attempt left. Locks the
 * database before the backup, the order of every other path that holds both (DELETE, cancel-deletion, the
 * removal): the other order could deadlock with them. `sweep`: a real backup is left to its job for an hour.
 */
export async function completeBackup(
  ctx: ServiceContext,
  input: { backup_id: string; job?: JobInfo | undefined; sweep?: boolean },
): Promise<void> {
  const { deps } = ctx;
  const repo = repositoryOf(ctx.deps, 'databases');
  const backupId = input.backup_id;
  const pending = await repo.findPendingBackup(ctx.em, backupId);
  if (!pending) return;
  const source = await repo.findLiveDatabase(ctx.em, pending.database.id);
  if (!source) return;
  const now = deps.clock.now();
  if (input.sweep && source.server && now.getTime() - pending.createdAt.getTime() < 3_600_000) return;
  let result: { sizeBytes: number } | { reason: string };
  try {
    result = {
      sizeBytes: await runtimeOf(ctx.deps, 'databases').driver.runBackup(instanceOf(source), backupId, now),
    };
  } catch (err) {
    deps.log.warn({ backup_id: backupId, err: reasonOf(err) }, 'database backup failed');
    // A dump stopped at its bound is not tried again: the next run would meet it too.
    if (retriesLeft(input.job) && !(err instanceof PermanentDriverError))
      throw new Error(reasonOf(err), { cause: err });
    result = { reason: reasonOf(err) };
  }
  await repo.transaction(repo.fork(), async (tx) => {
    const d = await repo.lockDatabase(tx, source.id, {}, { removed: true });
    if (!d || d.removedAt) return;
    const b = await repo.lockBackup(tx, backupId);
    if (!b || b.status !== 'pending') return;
    finishBackup(ctx, tx, b, d, deps.clock.now(), result);
  });
}

// ---------- transitions ----------

/**
 * The readiness job: `creating` or `resizing` → `running`, for the generation it was queued for. A real database is
 * created (or its new size applied) on its server first, outside any transaction; a creation that still fails when
 * the job has no attempt left makes the database `failed` with the reason (the driver left nothing on the server);
 * a resize that fails stays `resizing` with the reason, and the sweep tries it again every minute.
 */
export async function finishTransition(
  ctx: ServiceContext,
  input: TransitionJobData & { job?: JobInfo | undefined },
): Promise<void> {
  const { deps } = ctx;
  const repo = repositoryOf(ctx.deps, 'databases');
  const current = await repo.findLiveDatabase(ctx.em, input.database_id);
  if (!current || current.generation !== input.generation) return;
  if (current.status !== 'creating' && current.status !== 'resizing') return;
  let failure: string | null = null;
  if (current.server) {
    const driver = runtimeOf(ctx.deps, 'databases').driver;
    try {
      if (current.status === 'creating') {
        // Only the job queued by the create carries the credentials: the sweep leaves a creation to it.
        if (input.verifier === undefined) return;
        await driver.create(instanceOf(current), {
          fromBackupId: current.restoredFromBackupId,
          verifier: input.verifier,
        });
      } else {
        await driver.applySize(instanceOf(current));
      }
    } catch (err) {
      deps.log.warn({ database_id: current.id, err: reasonOf(err) }, 'database change failed');
      if (retriesLeft(input.job) && !(err instanceof PermanentDriverError))
        throw new Error(reasonOf(err), { cause: err });
      failure = reasonOf(err);
    }
  }
  await repo.transaction(repo.fork(), async (tx) => {
    const d = await repo.lockDatabase(tx, input.database_id);
    if (!d || d.generation !== input.generation) return;
    if (d.status !== 'creating' && d.status !== 'resizing') return;
    const now = deps.clock.now();
    if (failure !== null) {
      d.statusReason = failure;
      if (d.status === 'creating') {
        moveDatabase(d, 'failed', now);
        d.nextBackupAt = null;
        d.backupSchedule += 1;
        await repo.closeUsagePeriod(tx, d.id, now);
        repo.recordEvent(
          tx,
          databaseUpdated,
          toDatabaseDetailDto(d, await metricsOf(d, runtimeOf(ctx.deps, 'databases').driver, now)),
          d.organization.id,
          now,
        );
      }
      return;
    }
    moveDatabase(d, 'running', now);
    d.statusReason = null;
  });
}

/**
 * How long past its `deletion_scheduled` a deletion is left to its job's retries before the sweep removes the
 * database without a final dump (docs/databases.md, "When the final dump fails").
 */
export const FORCED_REMOVAL_AFTER_MS = 10 * 60_000;

/**
 * The removal at `deletion_scheduled`: the database disappears from the API (404), its final backup is completed
 * first, the other backups go, and the final backups stay restorable for 7 days. A real database's login is
 * disabled first (the grace is over: nothing of the tenant's may run on it any more), then its final backup is
 * dumped again, so that it holds what was written during the grace period, and the database and login are dropped.
 * A deletion always ends (docs/databases.md, "When the final dump fails"): a dump that fails is tried again by the
 * job's retries, and once they are spent (or the dump stopped at its bound, or the sweep finds the removal overdue
 * by `FORCED_REMOVAL_AFTER_MS`) the database is dropped without it, its final backup `failed` with the reason.
 * Without `generation` (the sweep) any `deleting` database due is removed. True when it removed the database.
 */
export async function removeDatabase(
  ctx: ServiceContext,
  input: { database_id: string; generation?: number | undefined; job?: JobInfo | undefined },
): Promise<boolean> {
  const { deps } = ctx;
  const { database_id: databaseId, generation, job } = input;
  const repo = repositoryOf(ctx.deps, 'databases');
  const driver = runtimeOf(ctx.deps, 'databases').driver;
  const pre = await repo.findLiveDatabase(ctx.em, databaseId);
  if (!pre || pre.status !== 'deleting') return false;
  if (generation !== undefined && pre.generation !== generation) return false;
  let lastDump: { id: string; sizeBytes: number } | null = null;
  let dumpFailure: string | null = null;
  if (pre.server) {
    try {
      await driver.disableLogin?.(instanceOf(pre));
    } catch (err) {
      // Dropped below in any case; a server that does not answer fails the dump too.
      deps.log.warn({ database_id: pre.id, err: reasonOf(err) }, 'disabling the login of a removal failed');
    }
    const final = await repo.latestFinalBackup(ctx.em, pre.id);
    if (final) {
      try {
        lastDump = {
          id: final.id,
          sizeBytes: await driver.runBackup(instanceOf(pre), final.id, deps.clock.now()),
        };
      } catch (err) {
        const overdue =
          pre.deletionScheduledAt != null &&
          deps.clock.now().getTime() - pre.deletionScheduledAt.getTime() > FORCED_REMOVAL_AFTER_MS;
        const lastTry = err instanceof PermanentDriverError || (job ? !retriesLeft(job) : overdue);
        deps.log.warn(
          { database_id: pre.id, err: reasonOf(err), attempt: job?.retryCount, lastTry },
          lastTry
            ? 'final backup failed: the database is removed without it'
            : 'final backup failed: the removal waits',
        );
        if (!lastTry) throw new Error(reasonOf(err), { cause: err });
        dumpFailure =
          `the final dump failed, and the database was removed without it: ${reasonOf(err)}`.slice(0, 500);
      }
    }
  }
  return repo.transaction(repo.fork(), async (tx) => {
    const now = deps.clock.now();
    const d = await repo.lockDatabase(tx, databaseId);
    if (!d || d.status !== 'deleting') return false;
    if (generation !== undefined && d.generation !== generation) return false;
    const backups = await repo.lockBackupsOf(tx, d.id);
    const keepUntil = new Date(now.getTime() + FINAL_BACKUP_KEPT_DAYS * DAY_MS);
    for (const b of backups) {
      if (b.type === 'final') {
        if (lastDump && b.id === lastDump.id) {
          if (b.status === 'completed') {
            b.sizeBytes = lastDump.sizeBytes;
            b.completedAt = now;
          } else finishBackup(ctx, tx, b, d, now, { sizeBytes: lastDump.sizeBytes });
        } else if (b.status === 'pending') {
          // A completed dump of the deletion's request, when there is one, is kept as it is.
          if (dumpFailure !== null) finishBackup(ctx, tx, b, d, now, { reason: dumpFailure });
          else
            finishBackup(ctx, tx, b, d, now, {
              sizeBytes: await driver.runBackup(instanceOf(d), b.id, now),
            });
        }
        b.expiresAt = keepUntil;
        b.updatedAt = now;
      } else {
        await driver.deleteBackup(b.id);
        repo.removeBackup(tx, b);
      }
    }
    await driver.destroy(instanceOf(d));
    await repo.closeUsagePeriod(tx, d.id, now);
    d.removedAt = now;
    d.updatedAt = now;
    d.nextBackupAt = null;
    if (dumpFailure !== null) d.statusReason = dumpFailure;
    return true;
  });
}

// ---------- the sweep ----------

/** Removes the backups whose `expires_at` has passed (at most `batch` per call); returns how many. */
export async function pruneExpiredBackups(
  ctx: ServiceContext,
  input: { batch?: number } = {},
): Promise<number> {
  const { batch = 500 } = input;
  const repo = repositoryOf(ctx.deps, 'databases');
  const driver = runtimeOf(ctx.deps, 'databases').driver;
  return repo.transaction(ctx.em, async (tx) => {
    const now = ctx.deps.clock.now();
    const expired = await repo.lockExpiredBackups(tx, now, batch);
    for (const b of expired) {
      await driver.deleteBackup(b.id);
      repo.removeBackup(tx, b);
    }
    return expired.length;
  });
}

/**
 * What the periodic sweep does: removes expired backups and the databases whose deletion is due, and finishes the
 * transitions and backups overdue by more than a minute (their job lost its last attempt, or the clock moved on).
 * Each step runs on a unit of work of its own.
 */
export async function sweepDatabases(
  ctx: ServiceContext,
): Promise<{ removedBackups: number; removedDatabases: number; finished: number }> {
  const { deps } = ctx;
  const now = deps.clock.now();
  const repo = repositoryOf(ctx.deps, 'databases');
  const removedBackups = await pruneExpiredBackups(freshContext(ctx));

  let removedDatabases = 0;
  const due = await repo.deletionsDue(ctx.em, now, 500);
  for (const d of due) {
    try {
      if (await removeDatabase(freshContext(ctx), { database_id: d.id })) removedDatabases++;
    } catch {
      // Logged by the removal; tried again at the next sweep.
    }
  }

  const overdue = new Date(now.getTime() - deps.config.provisioningDelayMs - 60_000);
  let finished = 0;
  const stuck = await repo.stuckTransitions(ctx.em, overdue, 500);
  for (const d of stuck) {
    await finishTransition(freshContext(ctx), { database_id: d.id, generation: d.generation });
    finished++;
  }
  await enforceStorage(freshContext(ctx));
  const pending = await repo.overdueBackups(ctx.em, overdue, 500);
  for (const b of pending) {
    await completeBackup(freshContext(ctx), { backup_id: b.id, sweep: true });
    finished++;
  }
  return { removedBackups, removedDatabases, finished };
}

/**
 * The storage check of the sweep (docs/databases.md, "Databases", Real servers): a real `running` database over the
 * storage of its size becomes read-only, and writable again once back under; each change emits `database.updated`.
 * A database already read-only and still over has its state asserted again on the server (what its tenant undid is
 * put back). `limitBytes` (tests) replaces the storage of the size.
 */
export async function enforceStorage(
  ctx: ServiceContext,
  input: { limitBytes?: (d: ManagedDatabase) => number } = {},
): Promise<number> {
  const { deps } = ctx;
  const { limitBytes = (d: ManagedDatabase) => SIZE_SPECS[d.size].storageGb * 1e9 } = input;
  const repo = repositoryOf(ctx.deps, 'databases');
  const driver = runtimeOf(ctx.deps, 'databases').driver;
  const real = await repo.runningOnServers(ctx.em, 1000);
  let changed = 0;
  for (const d of real) {
    let over: boolean;
    try {
      const bytes = await driver.storageBytes(instanceOf(d));
      if (bytes === null) continue;
      over = bytes > limitBytes(d);
      // Read-only is asserted again at every check (docs/databases.md, "Read-only over its storage"): whatever the
      // tenant undid is put back (the driver changes nothing when the server's state is already that).
      if (over && d.readOnly) await driver.setReadOnly(instanceOf(d), true);
      if (over === d.readOnly) continue;
      await driver.setReadOnly(instanceOf(d), over);
    } catch (err) {
      deps.log.warn({ database_id: d.id, err: reasonOf(err) }, 'database storage check failed');
      continue;
    }
    await repo.transaction(repo.fork(), async (tx) => {
      const now = deps.clock.now();
      const locked = await repo.lockDatabase(tx, d.id, {}, { removed: true });
      if (!locked) return;
      locked.readOnly = over;
      locked.updatedAt = now;
      repo.recordEvent(
        tx,
        databaseUpdated,
        toDatabaseDetailDto(locked, await metricsOf(locked, driver, now)),
        locked.organization.id,
        now,
      );
    });
    changed++;
  }
  return changed;
}
