import { serviceContext, type AppDeps } from '../../kit/deps.js';
import { z } from 'zod';
import { defineJob, noPayload } from '../../kit/jobs.js';
import {
  completeBackup,
  finishTransition,
  removeDatabase,
  runAutomaticBackup,
  sweepDatabases,
} from './databases-lifecycle.service.js';
import { withToolLimits } from './drivers/engine-server.js';

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
 * Handlers are idempotent: each acts only on the state (and generation) it was queued for. What each does to the
 * data is in databases-lifecycle.service.ts; a handler runs it on a unit of work of its own.
 */

const transitionJobPayload = z.object({
  database_id: z.string().min(1),
  /** The database's `generation` when the job was queued. */
  generation: z.number().int().nonnegative(),
  /**
   * Creation of a real database: its password as the server stores it (a SCRAM verifier or a native hash, never
   * the password), for the job to create the login with.
   */
  verifier: z.string().nullish(),
});
export type TransitionJobData = z.output<typeof transitionJobPayload>;

const backupJobPayload = z.object({ backup_id: z.string().min(1) });
export type BackupJobData = z.output<typeof backupJobPayload>;

const autoBackupJobPayload = z.object({
  database_id: z.string().min(1),
  /** The database's `backupSchedule` when the job was queued. */
  schedule: z.number().int(),
});
export type AutoBackupJobData = z.output<typeof autoBackupJobPayload>;

/** The attempts after the first of the jobs that change a database or take a backup. */
export const JOB_RETRY_LIMIT = 5;

const RETRY = { retryLimit: JOB_RETRY_LIMIT, retryDelaySeconds: 1, retryBackoff: true } as const;

/**
 * The jobs that run a tool on a tenant's database (a dump, a restore) run several at a time in each process, one
 * per worker: a dump waiting on a tenant's lock, or a slow restore, holds one worker until its bound
 * (`DATABASE_TOOL_TIMEOUT`), never the others' backups, creates and removals (docs/databases.md, "Limits of the
 * tools").
 */
export const DATABASE_JOB_CONCURRENCY = 4;
// A removal may run two dumps of at most `DATABASE_TOOL_TIMEOUT` (6 h at most) each: the job's own bound is above that.
const TOOL_JOBS = {
  batchSize: 1,
  concurrency: DATABASE_JOB_CONCURRENCY,
  expireInSeconds: 13 * 3600,
} as const;

/** Runs `fn` with the configured bounds of the tools (docs/databases.md, "Limits of the tools"). */
export const bounded = <T>(deps: AppDeps, fn: () => Promise<T>): Promise<T> =>
  withToolLimits(deps.config.databases.tools, fn);

export const databasesReadyJob = defineJob(
  'databases.ready',
  (deps, data, job) => bounded(deps, () => finishTransition(serviceContext(deps), { ...data, job })),
  { ...RETRY, ...TOOL_JOBS, payload: transitionJobPayload },
);

export const databasesCompleteBackupJob = defineJob(
  'databases.complete-backup',
  (deps, data, job) =>
    bounded(deps, () => completeBackup(serviceContext(deps), { backup_id: data.backup_id, job })),
  { ...RETRY, ...TOOL_JOBS, payload: backupJobPayload },
);

export const databasesAutoBackupJob = defineJob(
  'databases.auto-backup',
  (deps, data) => runAutomaticBackup(serviceContext(deps), data),
  // The schedule lives in this chain of jobs: retried for about an hour before the sweep's help is needed.
  { retryLimit: 12, retryDelaySeconds: 2, retryBackoff: true, batchSize: 10, payload: autoBackupJobPayload },
);

export const databasesRemoveJob = defineJob(
  'databases.remove',
  async (deps, data, job) => {
    await bounded(deps, () =>
      removeDatabase(serviceContext(deps), {
        database_id: data.database_id,
        generation: data.generation,
        job,
      }),
    );
  },
  { ...RETRY, ...TOOL_JOBS, payload: transitionJobPayload },
);

export const databasesSweepJob = defineJob(
  'databases.sweep',
  async (deps) => {
    const done = await bounded(deps, () => sweepDatabases(serviceContext(deps)));
    if (done.removedBackups + done.removedDatabases + done.finished > 0)
      deps.log.info(done, 'database sweep');
  },
  { cron: '* * * * *', payload: noPayload },
);

export const DATABASE_JOBS = [
  databasesReadyJob,
  databasesCompleteBackupJob,
  databasesAutoBackupJob,
  databasesRemoveJob,
  databasesSweepJob,
];
