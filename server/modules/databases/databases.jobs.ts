import type { JobInfo } from '../../jobs/queue.js';
import type { AppDeps } from '../../kit/deps.js';
import { defineJob } from '../../kit/jobs.js';
import { newId } from '../../lib/ids.js';
import { DAY_MS, FINAL_BACKUP_KEPT_DAYS, SIZE_SPECS, type BackupType } from './databases.constants.js';
import { instanceOf, metricsOf, toBackupDto, toDatabaseDetailDto } from './databases.dto.js';
import { databaseBackupCompleted, databaseUpdated } from './databases.events.js';
import { PermanentDriverError } from './databases.driver.js';
import type { DatabasesTx } from './databases.repository.js';
import type { DatabaseBackup } from './database-backup.entity.js';
import type { ManagedDatabase } from './database.entity.js';

/**
 * The life of a database on the durable job queue (docs/databases.md, "Databases"). Every change of state is written in the
 * transaction of the request that asks for it, together with the job that finishes it, so a change committed just
 * before a crash finishes after the restart, and a rolled-back one queues nothing:
 *
 * - `databases.ready`: `creating` or `resizing` → `running`, when the driver's operation is done;
 * - `databases.complete-backup`: a backup `pending` → `completed` (`database.backup.completed`);
 * - `databases.auto-backup`: takes an automatic backup and queues the next one, `BACKUP_INTERVAL` later;
 * - `databases.remove`: removes a `deleting` database at `deletion_scheduled`;
 * - `databases.sweep` (every minute): removes expired backups, and finishes anything whose job is overdue (a job
 *   that failed all its attempts, or a clock moved forward), so no database stays in a transitional state.
 *
 * Handlers are idempotent: each acts only on the state (and generation) it was queued for.
 */

export interface TransitionJobData {
  database_id: string;
  /** The database's `generation` when the job was queued. */
  generation: number;
  /**
   * Creation of a real database: its password as the server stores it (a SCRAM verifier or a native hash, never
   * the password), for the job to create the login with.
   */
  verifier?: string | null;
}

export interface BackupJobData {
  backup_id: string;
}

export interface AutoBackupJobData {
  database_id: string;
  /** The database's `backupSchedule` when the job was queued. */
  schedule: number;
}

const RETRY = { retryLimit: 5, retryDelaySeconds: 1, retryBackoff: true } as const;

export const databasesReadyJob = defineJob<TransitionJobData>(
  'databases.ready',
  (deps, data, job) => finishTransition(deps, data, job),
  { ...RETRY, batchSize: 10 },
);

export const databasesCompleteBackupJob = defineJob<BackupJobData>(
  'databases.complete-backup',
  (deps, data, job) => completeBackup(deps, data.backup_id, { job }),
  { ...RETRY, batchSize: 10 },
);

export const databasesAutoBackupJob = defineJob<AutoBackupJobData>(
  'databases.auto-backup',
  (deps, data) => runAutomaticBackup(deps, data),
  // The schedule lives in this chain of jobs: retried for about an hour before the sweep's help is needed.
  { retryLimit: 12, retryDelaySeconds: 2, retryBackoff: true, batchSize: 10 },
);

export const databasesRemoveJob = defineJob<TransitionJobData>(
  'databases.remove',
  async (deps, data, job) => {
    await removeDatabase(deps, data.database_id, data.generation, job);
  },
  { ...RETRY, batchSize: 10 },
);

export const databasesSweepJob = defineJob(
  'databases.sweep',
  async (deps) => {
    const done = await sweepDatabases(deps);
    if (done.removedBackups + done.removedDatabases + done.finished > 0)
      deps.log.info(done, 'database sweep');
  },
  { cron: '* * * * *' },
);

export const DATABASE_JOBS = [
  databasesReadyJob,
  databasesCompleteBackupJob,
  databasesAutoBackupJob,
  databasesRemoveJob,
  databasesSweepJob,
];

/** Something to do once the transaction that queued jobs has committed. */
export type AfterCommit = () => void;

/** The module's store through a new EntityManager (a job's). */
const storeOf = (deps: AppDeps) => deps.modules.databases.repository.fresh();

export const runAll = (fns: readonly AfterCommit[]) => {
  for (const fn of fns) fn();
};

// ---------- automatic backups ----------

/** (Re)starts the automatic backups of `d`: the first one `BACKUP_INTERVAL` from now. */
export async function scheduleAutomaticBackups(
  deps: AppDeps,
  tx: DatabasesTx,
  d: ManagedDatabase,
  now: Date,
  delayMs = deps.config.databases.backupIntervalMs,
): Promise<AfterCommit> {
  d.backupSchedule += 1;
  d.nextBackupAt = new Date(now.getTime() + delayMs);
  return tx.queue(databasesAutoBackupJob, { database_id: d.id, schedule: d.backupSchedule }, delayMs);
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
export async function runAutomaticBackup(deps: AppDeps, data: AutoBackupJobData): Promise<void> {
  const after: AfterCommit[] = [];
  await storeOf(deps).transaction(async (tx) => {
    const now = deps.clock.now();
    const d = await tx.lockDatabase(data.database_id);
    if (!d || d.backupSchedule !== data.schedule || !d.backupEnabled || d.status === 'deleting') return;
    if (d.status !== 'running') {
      after.push(await scheduleAutomaticBackups(deps, tx, d, now, deps.config.provisioningDelayMs + 1000));
      return;
    }
    const retentionMs = d.backupRetention * DAY_MS;
    const started = await startBackup(deps, tx, d, 'automatic', now, {
      expiresAt: new Date(now.getTime() + retentionMs),
    });
    after.push(started.wake, await scheduleAutomaticBackups(deps, tx, d, now));
  });
  runAll(after);
}

// ---------- backups ----------

const stamp = (d: Date) =>
  d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace('T', '-')
    .replace(/\.\d+Z$/, '');

/** Records a new `pending` backup of `d` and queues its completion. */
export async function startBackup(
  deps: AppDeps,
  tx: DatabasesTx,
  d: ManagedDatabase,
  type: BackupType,
  now: Date,
  opts: { name?: string | undefined; description?: string | undefined; expiresAt?: Date | null } = {},
): Promise<{ backup: DatabaseBackup; wake: AfterCommit }> {
  const id = newId('backup');
  const op = await deps.modules.databases.driver.startBackup(instanceOf(d), id);
  const backup = tx.createBackup({
    id,
    createdAt: now,
    updatedAt: now,
    database: d,
    type,
    status: 'pending',
    name: opts.name ?? `${d.name}-${type}-${stamp(now)}`,
    description: opts.description ?? null,
    sizeBytes: null,
    completedAt: null,
    expiresAt: opts.expiresAt ?? null,
  });
  const wake = await tx.queue(databasesCompleteBackupJob, { backup_id: id }, op.readyInMs);
  return { backup, wake };
}

/** Whether `job` has attempts left (a job's retries); no job (the sweep, a direct call): none. */
function retriesLeft(job: JobInfo | undefined, limit: number = RETRY.retryLimit): boolean {
  return job !== undefined && job.retryCount < limit;
}

/** An error's message for the API's records: drivers already leave credentials out; at most 500 characters. */
function reasonOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 500) || 'unknown error';
}

/** `pending` → `completed` (or `failed` with `reason`), inside `tx`: `last_backup`, `database.backup.completed`. */
function finishBackup(
  tx: DatabasesTx,
  b: DatabaseBackup,
  d: ManagedDatabase,
  now: Date,
  result: { sizeBytes: number } | { reason: string },
) {
  b.updatedAt = now;
  if ('reason' in result) {
    b.status = 'failed';
    b.failureReason = result.reason;
    return;
  }
  b.sizeBytes = result.sizeBytes;
  b.status = 'completed';
  b.failureReason = null;
  b.completedAt = now;
  if (!d.lastBackupAt || d.lastBackupAt < now) d.lastBackupAt = now;
  tx.recordEvent(databaseBackupCompleted, toBackupDto(b, d), b.organization.id, now);
}

/**
 * The completion job: the driver takes the backup (a real dump: outside any transaction, it can take minutes), then
 * a `pending` backup becomes `completed`, or `failed` with the reason once the job has no attempt left. Locks the
 * database before the backup, the order of every other path that holds both (DELETE, cancel-deletion, the
 * removal): the other order could deadlock with them. `sweep`: a real backup is left to its job for an hour.
 */
export async function completeBackup(
  deps: AppDeps,
  backupId: string,
  opts: { job?: JobInfo; sweep?: boolean } = {},
): Promise<void> {
  const store = storeOf(deps);
  const pending = await store.findPendingBackup(backupId);
  if (!pending) return;
  const source = await store.findLiveDatabase(pending.database.id);
  if (!source) return;
  const now = deps.clock.now();
  if (opts.sweep && source.server && now.getTime() - pending.createdAt.getTime() < 3_600_000) return;
  let result: { sizeBytes: number } | { reason: string };
  try {
    result = { sizeBytes: await deps.modules.databases.driver.runBackup(instanceOf(source), backupId, now) };
  } catch (err) {
    deps.log.warn({ backup_id: backupId, err: reasonOf(err) }, 'database backup failed');
    if (retriesLeft(opts.job)) throw new Error(reasonOf(err), { cause: err });
    result = { reason: reasonOf(err) };
  }
  await storeOf(deps).transaction(async (tx) => {
    const d = await tx.lockDatabase(source.id, {}, { removed: true });
    if (!d || d.removedAt) return;
    const b = await tx.lockBackup(backupId);
    if (!b || b.status !== 'pending') return;
    finishBackup(tx, b, d, deps.clock.now(), result);
  });
}

// ---------- transitions ----------

/**
 * The readiness job: `creating` or `resizing` → `running`, for the generation it was queued for. A real database is
 * created (or its new size applied) on its server first, outside any transaction; a creation that still fails when
 * the job has no attempt left makes the database `failed` with the reason (the driver left nothing on the server);
 * a resize that fails stays `resizing` with the reason, and the sweep tries it again every minute.
 */
export async function finishTransition(deps: AppDeps, data: TransitionJobData, job?: JobInfo): Promise<void> {
  const current = await storeOf(deps).findLiveDatabase(data.database_id);
  if (!current || current.generation !== data.generation) return;
  if (current.status !== 'creating' && current.status !== 'resizing') return;
  let failure: string | null = null;
  if (current.server) {
    const driver = deps.modules.databases.driver;
    try {
      if (current.status === 'creating') {
        // Only the job queued by the create carries the credentials: the sweep leaves a creation to it.
        if (data.verifier === undefined) return;
        await driver.create(instanceOf(current), {
          fromBackupId: current.restoredFromBackupId,
          verifier: data.verifier,
        });
      } else {
        await driver.applySize(instanceOf(current));
      }
    } catch (err) {
      deps.log.warn({ database_id: current.id, err: reasonOf(err) }, 'database change failed');
      if (retriesLeft(job) && !(err instanceof PermanentDriverError))
        throw new Error(reasonOf(err), { cause: err });
      failure = reasonOf(err);
    }
  }
  await storeOf(deps).transaction(async (tx) => {
    const d = await tx.lockDatabase(data.database_id);
    if (!d || d.generation !== data.generation) return;
    if (d.status !== 'creating' && d.status !== 'resizing') return;
    const now = deps.clock.now();
    if (failure !== null) {
      d.statusReason = failure;
      if (d.status === 'creating') {
        d.status = 'failed';
        d.updatedAt = now;
        d.nextBackupAt = null;
        d.backupSchedule += 1;
        await tx.closeUsagePeriod(d.id, now);
        tx.recordEvent(
          databaseUpdated,
          toDatabaseDetailDto(d, await metricsOf(d, deps.modules.databases.driver, now)),
          d.organization.id,
          now,
        );
      }
      return;
    }
    d.status = 'running';
    d.statusReason = null;
    d.updatedAt = now;
  });
}

/**
 * The removal at `deletion_scheduled`: the database disappears from the API (404), its final backup is completed
 * first, the other backups go, and the final backups stay restorable for 7 days. A real database's final backup is
 * dumped again just before its database and login are dropped (its sessions end), so it holds what was written
 * during the grace period; while that dump fails the database stays `deleting` (the job, then the sweep, retry):
 * nothing is dropped without a dump. Without `generation` (the sweep) any `deleting` database due is removed.
 */
export async function removeDatabase(
  deps: AppDeps,
  databaseId: string,
  generation?: number,
  job?: JobInfo,
): Promise<boolean> {
  const driver = deps.modules.databases.driver;
  const store = storeOf(deps);
  const pre = await store.findLiveDatabase(databaseId);
  if (!pre || pre.status !== 'deleting') return false;
  if (generation !== undefined && pre.generation !== generation) return false;
  let lastDump: { id: string; sizeBytes: number } | null = null;
  if (pre.server) {
    const final = await store.latestFinalBackup(pre.id);
    if (final) {
      try {
        lastDump = {
          id: final.id,
          sizeBytes: await driver.runBackup(instanceOf(pre), final.id, deps.clock.now()),
        };
      } catch (err) {
        deps.log.warn(
          { database_id: pre.id, err: reasonOf(err), attempt: job?.retryCount },
          'final backup failed: the removal waits',
        );
        throw new Error(reasonOf(err), { cause: err });
      }
    }
  }
  return storeOf(deps).transaction(async (tx) => {
    const now = deps.clock.now();
    const d = await tx.lockDatabase(databaseId);
    if (!d || d.status !== 'deleting') return false;
    if (generation !== undefined && d.generation !== generation) return false;
    const backups = await tx.lockBackupsOf(d.id);
    const keepUntil = new Date(now.getTime() + FINAL_BACKUP_KEPT_DAYS * DAY_MS);
    for (const b of backups) {
      if (b.type === 'final') {
        if (lastDump && b.id === lastDump.id) {
          if (b.status === 'completed') {
            b.sizeBytes = lastDump.sizeBytes;
            b.completedAt = now;
          } else finishBackup(tx, b, d, now, { sizeBytes: lastDump.sizeBytes });
        } else if (b.status === 'pending') {
          finishBackup(tx, b, d, now, { sizeBytes: await driver.runBackup(instanceOf(d), b.id, now) });
        }
        b.expiresAt = keepUntil;
        b.updatedAt = now;
      } else {
        await driver.deleteBackup(b.id);
        tx.removeBackup(b);
      }
    }
    await driver.destroy(instanceOf(d));
    await tx.closeUsagePeriod(d.id, now);
    d.removedAt = now;
    d.updatedAt = now;
    d.nextBackupAt = null;
    return true;
  });
}

// ---------- the sweep ----------

/** Removes the backups whose `expires_at` has passed (at most `batch` per call); returns how many. */
export async function pruneExpiredBackups(deps: AppDeps, batch = 500): Promise<number> {
  const driver = deps.modules.databases.driver;
  return storeOf(deps).transaction(async (tx) => {
    const now = deps.clock.now();
    const expired = await tx.lockExpiredBackups(now, batch);
    for (const b of expired) {
      await driver.deleteBackup(b.id);
      tx.removeBackup(b);
    }
    return expired.length;
  });
}

/**
 * What the periodic sweep does: removes expired backups and the databases whose deletion is due, and finishes the
 * transitions and backups overdue by more than a minute (their job lost its last attempt, or the clock moved on).
 */
export async function sweepDatabases(
  deps: AppDeps,
): Promise<{ removedBackups: number; removedDatabases: number; finished: number }> {
  const now = deps.clock.now();
  const store = storeOf(deps);
  const removedBackups = await pruneExpiredBackups(deps);

  let removedDatabases = 0;
  const due = await store.deletionsDue(now, 500);
  for (const d of due) {
    try {
      if (await removeDatabase(deps, d.id)) removedDatabases++;
    } catch {
      // Logged by the removal; tried again at the next sweep.
    }
  }

  const overdue = new Date(now.getTime() - deps.config.provisioningDelayMs - 60_000);
  let finished = 0;
  const stuck = await store.stuckTransitions(overdue, 500);
  for (const d of stuck) {
    await finishTransition(deps, { database_id: d.id, generation: d.generation });
    finished++;
  }
  await enforceStorage(deps);
  const pending = await store.overdueBackups(overdue, 500);
  for (const b of pending) {
    await completeBackup(deps, b.id, { sweep: true });
    finished++;
  }
  return { removedBackups, removedDatabases, finished };
}

/**
 * The storage check of the sweep (docs/databases.md, "Databases", Real servers): a real `running` database over the storage of
 * its size becomes read-only, and writable again once back under; each change emits `database.updated`.
 * `limitBytes` (tests) replaces the storage of the size.
 */
export async function enforceStorage(
  deps: AppDeps,
  limitBytes: (d: ManagedDatabase) => number = (d) => SIZE_SPECS[d.size].storageGb * 1e9,
): Promise<number> {
  const driver = deps.modules.databases.driver;
  const real = await storeOf(deps).runningOnServers(1000);
  let changed = 0;
  for (const d of real) {
    let over: boolean;
    try {
      const bytes = await driver.storageBytes(instanceOf(d));
      if (bytes === null) continue;
      over = bytes > limitBytes(d);
      if (over === d.readOnly) continue;
      await driver.setReadOnly(instanceOf(d), over);
    } catch (err) {
      deps.log.warn({ database_id: d.id, err: reasonOf(err) }, 'database storage check failed');
      continue;
    }
    await storeOf(deps).transaction(async (tx) => {
      const now = deps.clock.now();
      const locked = await tx.lockDatabase(d.id, {}, { removed: true });
      if (!locked) return;
      locked.readOnly = over;
      locked.updatedAt = now;
      tx.recordEvent(
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
