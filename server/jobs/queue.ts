import { CompiledQuery, type Transaction } from 'kysely';
import pg from 'pg';
import PgBoss from 'pg-boss';
import type { Database, Em } from '../db/orm.js';

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
  /** A running job not finished after this many seconds counts as failed (default 15 minutes). */
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
    // Maintenance (expiry, retention) once a minute is plenty, and keeps the single PGlite connection free.
    superviseIntervalSeconds: 60,
  });
  boss.on('error', (err) => log.error({ err }, 'job queue error'));

  const defs = new Map<string, JobDefinition<never>>();
  const workerIds = new Map<string, string>();
  const stopping = new AbortController();
  let running = 0;
  let state: 'new' | 'starting' | 'started' | 'stopped' = 'new';
  let stopped: Promise<void> | undefined;

  async function runBatch(def: JobDefinition<never>, jobs: PgBoss.JobWithMetadata<object>[]) {
    running++;
    try {
      for (const job of jobs) {
        try {
          await (def.handler as JobHandler<object>)(job.data, {
            id: job.id,
            name: job.name,
            retryCount: job.retryCount,
            signal: stopping.signal,
          });
        } catch (err) {
          const willRetry = job.retryCount < job.retryLimit;
          log.warn(
            { err, job: job.id, queue: def.name, retryCount: job.retryCount, willRetry },
            'job failed',
          );
          // Fail this job alone; pg-boss completes the others of the batch (only jobs still active).
          await boss.fail(def.name, job.id, {
            message: err instanceof Error ? err.message : String(err),
          });
        }
      }
    } finally {
      running--;
    }
  }

  async function stopNow(timeoutMs: number) {
    const deadline = Date.now() + timeoutMs;
    stopping.abort();
    if (state === 'started' || state === 'starting') {
      // Waits for the batches pg-boss knows are running, then fails what is left at the timeout.
      await boss.stop({ graceful: true, wait: true, close: false, timeout: timeoutMs });
      // A poll in flight when the stop began can still hand over a batch: wait for it, and for the queue's own last
      // queries (completing or failing jobs), before the connection goes away.
      while ((running > 0 || queueDb.inFlight > 0) && Date.now() < deadline) await sleep(10);
      if (running > 0) log.warn({ running }, 'job queue stopped with handlers still running');
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
          ...(def.expireInSeconds ? { expireInSeconds: def.expireInSeconds } : {}),
        };
        // createQueue keeps an existing queue as it is: apply the current definition to it.
        // (pg-boss adds its defaults to the options object it is given: each call gets a copy.)
        await boss.createQueue(def.name, { ...queueOptions });
        await boss.updateQueue(def.name, { ...queueOptions });
        if (def.cron) await boss.schedule(def.name, def.cron, {}, { tz: 'UTC' });
        const id = await boss.work<object>(
          def.name,
          {
            batchSize: def.batchSize ?? 1,
            pollingIntervalSeconds: def.pollingIntervalSeconds ?? 0.5,
            includeMetadata: true,
          },
          (jobs) => runBatch(def, jobs),
        );
        workerIds.set(def.name, id);
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
      const id = workerIds.get(name);
      if (id) boss.notifyWorker(id);
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
