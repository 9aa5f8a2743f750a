import { CompiledQuery, type Transaction } from 'kysely';
import pg from 'pg';
import PgBoss from 'pg-boss';
import type { Database, Em } from '../db/orm.js';
import { WakeSignal } from '../lib/wake-signal.js';

export interface JobInfo {
  id: string;
  name: string;
  /** 0 on the first attempt. */
  retryCount: number;
  /**
   * Aborted when the queue starts stopping (SIGTERM). The stop waits for the running handler; one with several
   * steps may check this between them and leave the rest to a job it queues for later.
   */
  signal: AbortSignal;
}

export type JobHandler<T> = (data: T, job: JobInfo) => Promise<void>;

/** How a job runs: retries, schedule, batching. */
export interface JobOptions {
  /** Cron expression (UTC) for recurring jobs. */
  cron?: string;
  /**
   * Attempts after the first failure (a thrown error, or a stop that outlasted its timeout); 0 by default
   * (handlers decide their own retry policy).
   */
  retryLimit?: number;
  /** Seconds before a retry (default 1; 0 retries at the next poll). */
  retryDelaySeconds?: number;
  /** Doubles the retry delay on each attempt. */
  retryBackoff?: boolean;
  /**
   * A running job not finished after this many seconds counts as failed (default 15 minutes), even while its
   * process is alive. A job whose process died is retried much sooner: see {@link JOB_LEASE_SECONDS}.
   */
  expireInSeconds?: number;
  /** Jobs fetched per poll. Each job of a batch completes or fails on its own. */
  batchSize?: number;
  pollingIntervalSeconds?: number;
}

export interface JobDefinition<T> extends JobOptions {
  name: string;
  handler: JobHandler<T>;
}

/**
 * A job's name with its data type: what `send` takes, so that the data sent is the data the handler expects. The
 * modules' job definitions are refs (server/kit/jobs.ts); `jobRef` makes one for a queue defined by hand.
 */
export interface JobRef<T extends object> {
  readonly name: string;
  /** Carries the data type only; never set. */
  readonly __data?: (data: T) => void;
}

export function jobRef<T extends object>(name: string): JobRef<T> {
  return { name };
}

export interface SendOptions {
  /** Run no sooner than this many milliseconds from now. */
  delayMs?: number;
  /** At most one queued job per key and queue. */
  singletonKey?: string;
  /**
   * Enqueue inside this EntityManager's transaction, so the job exists exactly when the change that needs it
   * commits (a crash between the two cannot lose it, a rollback removes it). Inside `em.transactional` always pass
   * the transaction's `em`: on PGlite (one connection) a send without it waits for the transaction to end, which
   * never comes.
   */
  em?: Em;
}

/** A job as stored, for tests and diagnostics. */
export interface StoredJob {
  id: string;
  name: string;
  state: 'created' | 'retry' | 'active' | 'completed' | 'cancelled' | 'failed';
  data: unknown;
  retryCount: number;
  retryLimit: number;
  startAfter: Date;
  startedOn: Date | null;
  createdOn: Date;
  completedOn: Date | null;
  output: unknown;
}

/** The durable job queue: Postgres-backed (pg-boss), on PGlite and PostgreSQL alike. */
export interface JobQueue {
  define<T extends object>(def: JobDefinition<T>): void;
  send<T extends object>(job: JobRef<T>, data: NoInfer<T>, opts?: SendOptions): Promise<string | null>;
  start(): Promise<void>;
  /**
   * Stops fetching, waits (up to `timeoutMs`) for running handlers to finish their current job, then releases the
   * queue's database connections. Jobs still running at the timeout are failed (and retried per `retryLimit`).
   * Safe to call more than once, and without `start()`.
   */
  stop(timeoutMs?: number): Promise<void>;
  /** Wakes the workers of a queue now instead of at their next poll. */
  notify(name: string): void;
  /** A job as stored, or null. */
  getJob(name: string, id: string): Promise<StoredJob | null>;
}

const SCHEMA = 'pgboss';

/**
 * Crash recovery (README, "Jobs and crash recovery"). A claimed job is held on a lease: the process running it renews the lease every
 * {@link JOB_HEARTBEAT_MS} while the handler runs (or waits its turn in its batch). A process that dies stops
 * renewing, so its jobs lapse within `JOB_LEASE_SECONDS`; the queue's supervision (every
 * {@link JOB_SUPERVISE_SECONDS} in every process) then fails them as timed out, which is a retry like any other (it
 * counts against `retryLimit`) and runs after the job's retry delay. So a job held by a dead process runs again
 * within lease + supervision + retry delay (15 + 5 + the delay, a few seconds: under 30 s) of the death, as soon as
 * some process is running. A live process whose renewals fail for longer than the lease (a database outage, an event
 * loop blocked that long) may see its job run a second time elsewhere: handlers are idempotent.
 */
export const JOB_LEASE_SECONDS = 15;
/** How often a process renews the leases of the jobs it holds. */
export const JOB_HEARTBEAT_MS = 5_000;
/** How often each process looks for jobs whose lease (or `expireInSeconds`) ran out. */
export const JOB_SUPERVISE_SECONDS = 5;
const DEFAULT_MAX_RUN_SECONDS = 15 * 60;

interface QueueLogger {
  error(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

function emExecutor(em: Em): PgBoss.Db {
  return {
    async executeSql(text, values) {
      // em.execute() inlines `?` placeholders and drops the values of pg-boss's `$1` ones: send the query to the
      // driver as it is, on the transaction's connection when there is one.
      const runner = em.getTransactionContext<Transaction<unknown>>() ?? em.getConnection().getClient();
      const result = await runner.executeQuery(CompiledQuery.raw(text, values ?? []));
      return { rows: result.rows };
    },
  };
}

/**
 * The queue's own connection: PGlite's single instance (shared with the ORM) or a small pool of its own on
 * PostgreSQL. It counts queries in flight so that `stop()` can wait for pg-boss's last ones before closing.
 */
class QueueDb implements PgBoss.Db {
  inFlight = 0;
  closed = false;
  constructor(
    private readonly run: (text: string, values?: unknown[]) => Promise<{ rows: unknown[] }>,
    private readonly release: () => Promise<void>,
  ) {}

  async executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> {
    if (this.closed) throw new Error('The job queue is stopped');
    this.inFlight++;
    try {
      return await this.run(text, values);
    } finally {
      this.inFlight--;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.release();
  }
}

function queueDbFor(db: Database, log: QueueLogger): QueueDb {
  if (db.pglite) {
    const lite = db.pglite;
    return new QueueDb(
      async (text, values) => {
        // pg-boss sends its schema scripts as several statements without parameters: PGlite runs those with exec().
        if (!values || values.length === 0) {
          const results = await lite.exec(text);
          return { rows: results.flatMap((r) => r.rows) };
        }
        const r = await lite.query(text, values);
        return { rows: r.rows };
      },
      // The instance belongs to the database; it is closed with it.
      async () => {},
    );
  }
  const url = db.orm.config.get('clientUrl');
  if (!url) throw new Error('PostgreSQL job queue needs the database URL');
  const pool = new pg.Pool({ connectionString: url, max: 4, application_name: 'pgboss' });
  pool.on('error', (err) => log.error({ err }, 'job queue connection error'));
  return new QueueDb(
    async (text, values) => {
      // A script of several statements (pg-boss's monitoring and maintenance) yields one result per statement.
      const r = (await pool.query(text, values)) as pg.QueryResult | pg.QueryResult[];
      return { rows: Array.isArray(r) ? r.flatMap((x) => x.rows ?? []) : r.rows };
    },
    () => pool.end(),
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function createJobQueue(db: Database, log: QueueLogger): JobQueue {
  const queueDb = queueDbFor(db, log);
  const boss = new PgBoss({
    db: queueDb,
    schema: SCHEMA,
    // Expiry of lapsed leases: every process looks every few seconds; the queue's `monitor_on` stamp lets one look
    // per interval do the work for all (the stamp's interval is a little shorter than the timer's, so that the
    // looks of one process are never skipped by the stamp of its own previous look).
    superviseIntervalSeconds: JOB_SUPERVISE_SECONDS,
    monitorIntervalSeconds: JOB_SUPERVISE_SECONDS - 1,
  });
  boss.on('error', (err) => log.error({ err }, 'job queue error'));

  const defs = new Map<string, JobDefinition<never>>();
  const wakes = new Map<string, WakeSignal>();
  const loops: Promise<void>[] = [];
  /** The jobs this process holds (fetched, not yet completed or failed), per queue. */
  const held = new Map<string, Set<string>>();
  const stopping = new AbortController();
  let running = 0;
  let state: 'new' | 'starting' | 'started' | 'stopped' = 'new';
  let stopped: Promise<void> | undefined;

  /** The lease a job starts on: the queue's `expire_seconds`, renewed by the heartbeat. */
  const leaseOf = (def: JobDefinition<never>) => Math.min(JOB_LEASE_SECONDS, maxRunOf(def));
  const maxRunOf = (def: JobDefinition<never>) => def.expireInSeconds ?? DEFAULT_MAX_RUN_SECONDS;

  /**
   * Renews the leases of the jobs this process holds (those still active), each up to its definition's
   * `expireInSeconds` from the job's start, which stays the longest a job may run.
   */
  async function renewLeases() {
    for (const [name, ids] of held) {
      const def = defs.get(name);
      if (!def || ids.size === 0) continue;
      try {
        await queueDb.executeSql(
          `update ${SCHEMA}.job
              set expire_seconds = least($3::int, ceil(extract(epoch from (now() - started_on)))::int + $4::int)
            where name = $1 and id = any($2::uuid[]) and state = 'active'`,
          [name, [...ids], maxRunOf(def), leaseOf(def)],
        );
      } catch (err) {
        if (!queueDb.closed) log.warn({ err, queue: name }, 'could not renew the leases of running jobs');
      }
    }
  }
  let renewing: Promise<void> | undefined;
  let heartbeat: NodeJS.Timeout | undefined;

  async function runBatch(def: JobDefinition<never>, jobs: PgBoss.JobWithMetadata<object>[]) {
    running++;
    const mine = held.get(def.name)!;
    for (const job of jobs) mine.add(job.id);
    const done: string[] = [];
    try {
      for (const job of jobs) {
        try {
          await (def.handler as JobHandler<object>)(job.data, {
            id: job.id,
            name: job.name,
            retryCount: job.retryCount,
            signal: stopping.signal,
          });
          done.push(job.id);
        } catch (err) {
          const willRetry = job.retryCount < job.retryLimit;
          log.warn(
            { err, job: job.id, queue: def.name, retryCount: job.retryCount, willRetry },
            'job failed',
          );
          // Fail this job alone; the others of the batch complete.
          await boss
            .fail(def.name, job.id, { message: err instanceof Error ? err.message : String(err) })
            .then(() => mine.delete(job.id))
            .catch((e: unknown) =>
              log.error({ err: e, job: job.id, queue: def.name }, 'could not fail a job'),
            );
        }
      }
      if (done.length > 0) {
        // Only jobs still active complete (one whose lease lapsed meanwhile and that waits for its retry is left to
        // it; the retry finds its work done).
        await boss.complete(def.name, done);
        for (const id of done) mine.delete(id);
      }
    } catch (err) {
      // Not recorded: the lease lapses and the jobs run again (handlers are idempotent).
      log.error({ err, queue: def.name }, 'could not complete jobs');
    } finally {
      for (const job of jobs) mine.delete(job.id);
      running--;
    }
  }

  /**
   * One queue's worker: fetches a batch, runs it, fetches again at once while there is work, otherwise sleeps
   * until the next poll or a nudge (`notify`). (pg-boss's own workers would bound each batch by the jobs' lease,
   * which a heartbeat extends: this loop bounds it by nothing, the lease's renewals by `expireInSeconds`.)
   */
  async function workLoop(def: JobDefinition<never>, wake: WakeSignal) {
    const pollMs = (def.pollingIntervalSeconds ?? 0.5) * 1000;
    let failures = 0;
    while (!stopping.signal.aborted) {
      wake.reset();
      let jobs: PgBoss.JobWithMetadata<object>[] = [];
      try {
        jobs = await boss.fetch<object>(def.name, { batchSize: def.batchSize ?? 1, includeMetadata: true });
        failures = 0;
      } catch (err) {
        if (stopping.signal.aborted) break;
        failures++;
        log.error({ err, queue: def.name }, 'could not fetch jobs');
      }
      if (jobs.length > 0) {
        await runBatch(def, jobs);
        continue;
      }
      if (stopping.signal.aborted) break;
      await wake.sleep(failures > 0 ? Math.min(30_000, pollMs * 2 ** Math.min(failures, 6)) : pollMs);
    }
  }

  async function stopNow(timeoutMs: number) {
    const deadline = Date.now() + timeoutMs;
    stopping.abort();
    for (const wake of wakes.values()) wake.nudge();
    if (state === 'started' || state === 'starting') {
      await boss.stop({ graceful: false, close: false });
      // Waits for the running handlers (and a fetch in flight, which may still hand over a batch), then fails the
      // jobs still held at the timeout, and waits for the queue's own last queries before the connection goes.
      await Promise.race([Promise.all(loops), sleep(Math.max(0, deadline - Date.now()))]);
      if (running > 0) {
        log.warn({ running }, 'job queue stopped with handlers still running');
        for (const [name, ids] of held) {
          for (const id of ids) {
            await boss
              .fail(name, id, { message: 'the process stopped while the job was running' })
              .catch((err: unknown) => log.error({ err, queue: name }, 'could not fail a job still running'));
          }
        }
      }
      clearInterval(heartbeat);
      await renewing;
      while (queueDb.inFlight > 0 && Date.now() < deadline + 1000) await sleep(10);
    }
    state = 'stopped';
    await queueDb.close();
  }

  return {
    define(def) {
      if (state !== 'new') throw new Error(`job ${def.name} defined after start`);
      if (defs.has(def.name)) throw new Error(`job ${def.name} defined twice`);
      defs.set(def.name, def);
    },

    async send(job, data, opts = {}) {
      const name = job.name;
      if (!defs.has(name)) throw new Error(`unknown job ${name}`);
      if (state === 'new') throw new Error(`job ${name} sent before the job queue started`);
      const options: PgBoss.SendOptions = {};
      if (opts.delayMs && opts.delayMs > 0) options.startAfter = new Date(Date.now() + opts.delayMs);
      if (opts.singletonKey) options.singletonKey = opts.singletonKey;
      if (opts.em) options.db = emExecutor(opts.em);
      return boss.send(name, data, options);
    },

    async start() {
      if (state !== 'new') throw new Error('job queue already started');
      state = 'starting';
      await boss.start();
      for (const def of defs.values()) {
        const queueOptions = {
          retryLimit: def.retryLimit ?? 0,
          retryDelay: def.retryDelaySeconds ?? 1,
          retryBackoff: def.retryBackoff ?? false,
          // Every job starts on a lease, renewed while it runs (JOB_LEASE_SECONDS); `def.expireInSeconds` bounds
          // the renewals.
          expireInSeconds: leaseOf(def),
        };
        // createQueue keeps an existing queue as it is: apply the current definition to it.
        // (pg-boss adds its defaults to the options object it is given: each call gets a copy.)
        await boss.createQueue(def.name, { ...queueOptions });
        await boss.updateQueue(def.name, { ...queueOptions });
        // Jobs queued before leases existed carry the old 15-minute expiry: they start on a lease too.
        await queueDb.executeSql(
          `update ${SCHEMA}.job set expire_seconds = $2::int
            where name = $1 and state < 'active' and expire_seconds > $2::int`,
          [def.name, leaseOf(def)],
        );
        if (def.cron) await boss.schedule(def.name, def.cron, {}, { tz: 'UTC' });
        held.set(def.name, new Set());
      }
      heartbeat = setInterval(() => {
        renewing ??= renewLeases().finally(() => (renewing = undefined));
      }, JOB_HEARTBEAT_MS);
      heartbeat.unref();
      for (const def of defs.values()) {
        const wake = new WakeSignal();
        wakes.set(def.name, wake);
        loops.push(workLoop(def, wake));
      }
      // A job that is no longer recurring would otherwise keep being queued by its old schedule. (Schedules of
      // queues this process does not define are left alone: they may belong to another process on the database.)
      for (const schedule of await boss.getSchedules()) {
        const def = defs.get(schedule.name);
        if (def && !def.cron) await boss.unschedule(schedule.name, schedule.key);
      }
      state = 'started';
    },

    stop(timeoutMs = 10_000) {
      stopped ??= stopNow(timeoutMs);
      return stopped;
    },

    notify(name) {
      wakes.get(name)?.nudge();
    },

    async getJob(name, id) {
      const job = await boss.getJobById<unknown>(name, id);
      if (!job) return null;
      return {
        id: job.id,
        name: job.name,
        state: job.state,
        data: job.data,
        retryCount: job.retryCount,
        retryLimit: job.retryLimit,
        startAfter: job.startAfter,
        startedOn: job.startedOn ?? null,
        createdOn: job.createdOn,
        completedOn: job.completedOn ?? null,
        output: job.output ?? null,
      };
    },
  };
}
