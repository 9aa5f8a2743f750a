import type { EventSubscriber, TransactionEventArgs } from '@mikro-orm/core';
import { CompiledQuery, type Transaction } from 'kysely';
import {
  fromPglite,
  PgBoss,
  type Db,
  type JobResult,
  type JobWithMetadata,
  type SendOptions as BossSendOptions,
} from 'pg-boss';
import type { z } from 'zod';
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
  /**
   * A running job not finished after this many seconds counts as failed (default 15 minutes), even while its
   * process is alive. A job whose process died is retried much sooner: see {@link JOB_HEARTBEAT_SECONDS}.
   */
  expireInSeconds?: number;
  /** Jobs fetched per poll. They run one after the other; each completes or fails on its own. */
  batchSize?: number;
  /**
   * Workers of the queue in this process (default 1), each fetching and running its own batches: a job that
   * takes long (a dump waiting on a lock) holds one worker, not the queue.
   */
  concurrency?: number;
  /**
   * Seconds between two looks for jobs (default {@link DEFAULT_POLLING_SECONDS}). A job sent by this process, its
   * retries and a delayed job due within a minute wake the worker themselves (`notify`); polling finds the others.
   */
  pollingIntervalSeconds?: number;
}

export interface JobDefinition<T> extends JobOptions {
  name: string;
  /**
   * The job's data, checked by `send` (data that does not match throws: a programming error) and before the handler
   * runs (a job whose stored data does not match fails at once, without retries). A plain schema: the handler gets
   * what it parses, `send` stores the data as given.
   */
  payload?: z.ZodType<T>;
  handler: JobHandler<T>;
}

/** Why data does not match a job's schema, in one line. */
function payloadError(name: string, error: z.ZodError): Error {
  const issues = error.issues.map((i) => `${i.path.join('.') || '(data)'}: ${i.message}`).join('; ');
  return new Error(`job ${name}: data does not match its payload schema (${issues})`);
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
   * commits (a crash between the two cannot lose it, a rollback removes it). The queue wakes the job's workers once
   * the outermost transaction commits, never on a rollback (docs/jobs.md, "What the queue layer adds"). Inside
   * `em.transactional` always pass the transaction's `em`: on PGlite (one connection) a send without it waits for
   * the transaction to end, which never comes.
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
  /**
   * Wakes the workers of a queue instead of leaving a job to their next poll: now, or (`afterMs`) that much later.
   * `send` does it itself (after the commit, for a send in a transaction): this is for a wake not tied to a send.
   */
  notify(name: string, afterMs?: number): void;
  /** A job as stored, or null. */
  getJob(name: string, id: string): Promise<StoredJob | null>;
}

const SCHEMA = 'pgboss';

/**
 * Crash recovery (docs/jobs.md). pg-boss holds a claimed job on a heartbeat: the worker running a batch touches its
 * jobs every {@link JOB_HEARTBEAT_REFRESH_SECONDS} while the batch runs. A process that dies stops touching them;
 * once a job's last touch is older than `JOB_HEARTBEAT_SECONDS`, the monitor of any process (every
 * {@link JOB_SUPERVISE_SECONDS}) fails it as lost, which is a retry like any other (it counts against
 * `retryLimit`) and runs after the job's retry delay. So a job held by a dead process runs again within
 * heartbeat + monitor + retry delay (10 + 5 + the delay, a few seconds: under 30 s) of the death, as soon as some
 * process is running. A live process whose touches fail for longer than the heartbeat (a database outage, an event
 * loop blocked that long) may see its job run a second time elsewhere: handlers are idempotent.
 */
export const JOB_HEARTBEAT_SECONDS = 10;
/** How often a worker touches the jobs of the batch it runs (pg-boss's `heartbeatRefreshSeconds`). */
export const JOB_HEARTBEAT_REFRESH_SECONDS = 3;
/** How often each process looks for jobs whose heartbeat (or `expireInSeconds`) ran out. */
export const JOB_SUPERVISE_SECONDS = 5;
const DEFAULT_MAX_RUN_SECONDS = 15 * 60;

interface QueueLogger {
  error(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

function emExecutor(em: Em): Db {
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
 * pg-boss on the database: PGlite's single instance (shared with the ORM, closed with it) or a small pool of its own
 * on PostgreSQL (closed by `stop()`).
 */
function bossFor(db: Database): PgBoss {
  const common = {
    schema: SCHEMA,
    // Every process looks for lost jobs every few seconds; the queue's `monitor_on` stamp lets one look per
    // interval do the work for all (the stamp's interval is a little shorter than the timer's, so that the looks
    // of one process are never skipped by the stamp of its own previous look).
    superviseIntervalSeconds: JOB_SUPERVISE_SECONDS,
    monitorIntervalSeconds: JOB_SUPERVISE_SECONDS - 1,
  };
  if (db.pglite) return new PgBoss({ ...common, db: fromPglite(db.pglite), backend: 'pglite' });
  const url = db.orm.config.get('clientUrl');
  if (!url) throw new Error('PostgreSQL job queue needs the database URL');
  return new PgBoss({ ...common, connectionString: url, max: 4, application_name: 'pgboss' });
}

/**
 * The wakes of jobs sent inside transactions, run when the outermost transaction commits (docs/jobs.md, "What the
 * queue layer adds"). Registered once on the ORM's event manager: every transaction's fork clones it. Wakes
 * are kept per transaction context (the `em.getTransactionContext()` a send sees); a savepoint (a nested
 * `transactional`) hands its wakes to its parent when it is released, and a rollback drops them.
 */
class TransactionWakes implements EventSubscriber {
  /** The context a savepoint is opened in, by the transaction's fork, from its start's first event to its second. */
  private readonly opening = new WeakMap<object, object | undefined>();
  private readonly pending = new WeakMap<
    object,
    { parent: object | undefined; wakes: Map<string, () => void> }
  >();

  /**
   * Keeps `wake` (under `key`, once) until the transaction `ctx` commits; false when `ctx` is not a transaction this
   * subscriber saw start (its em's event manager lacks it).
   */
  add(ctx: object, key: string, wake: () => void): boolean {
    const entry = this.pending.get(ctx);
    if (!entry) return false;
    entry.wakes.set(key, wake);
    return true;
  }

  beforeTransactionStart({ em, transaction }: TransactionEventArgs) {
    // A savepoint gets its parent's context here and its own at the next event, both with the fork as `em`.
    this.opening.set(em, transaction);
  }

  afterTransactionStart({ em, transaction }: TransactionEventArgs) {
    if (!transaction) return;
    const parent = transaction.savepointName ? this.opening.get(em) : undefined;
    this.opening.delete(em);
    this.pending.set(transaction, { parent, wakes: new Map() });
  }

  afterTransactionCommit({ transaction }: TransactionEventArgs) {
    const entry = transaction && this.pending.get(transaction);
    if (!entry) return;
    this.pending.delete(transaction);
    const parent = entry.parent && this.pending.get(entry.parent);
    if (parent) for (const [key, wake] of entry.wakes) parent.wakes.set(key, wake);
    else for (const wake of entry.wakes.values()) wake();
  }

  afterTransactionRollback({ transaction }: TransactionEventArgs) {
    if (transaction) this.pending.delete(transaction);
  }
}

/** How long after a delayed job falls due its workers are woken (`notify`). */
const DUE_MARGIN_MS = 25;

/**
 * Seconds between two looks for jobs of a queue, pg-boss's own default: each look is a query, and a server runs
 * about thirty queues (every half second, as before, that was a query every 20 ms on an idle server).
 */
export const DEFAULT_POLLING_SECONDS = 2;

export function createJobQueue(db: Database, log: QueueLogger): JobQueue {
  const boss = bossFor(db);
  boss.on('error', (err) => log.error({ err }, 'job queue error'));

  const defs = new Map<string, JobDefinition<never>>();
  /** pg-boss's workers of each queue, to wake (`notify`). */
  const workers = new Map<string, string[]>();
  const stopping = new AbortController();
  const afterCommit = new TransactionWakes();
  db.orm.em.getEventManager().registerSubscriber(afterCommit);
  let running = 0;
  let state: 'new' | 'starting' | 'started' | 'stopped' = 'new';
  let stopped: Promise<void> | undefined;

  const maxRunOf = (def: JobDefinition<never>) => def.expireInSeconds ?? DEFAULT_MAX_RUN_SECONDS;

  /** Runs a batch one job after the other; each job completes or fails on its own. */
  async function runBatch(def: JobDefinition<never>, jobs: JobWithMetadata<object>[]): Promise<JobResult[]> {
    running++;
    const results: JobResult[] = [];
    try {
      for (const job of jobs) {
        // Failed by the stop's timeout, or no longer this worker's (its heartbeat found it retried elsewhere).
        if (job.signal.aborted) {
          results.push({
            id: job.id,
            status: 'failed',
            output: { message: 'not run: the job was taken back' },
          });
          continue;
        }
        const parsed = def.payload
          ? def.payload.safeParse(job.data)
          : { success: true as const, data: job.data };
        if (!parsed.success) {
          // Retrying would not change the data: failed for good (pg-boss's `deadletter` skips the retries).
          const err = payloadError(def.name, parsed.error);
          log.warn(
            { err, job: job.id, queue: def.name },
            'job failed: data does not match its payload schema',
          );
          results.push({ id: job.id, status: 'deadletter', output: { message: err.message } });
          continue;
        }
        try {
          await (def.handler as JobHandler<object>)(parsed.data, {
            id: job.id,
            name: job.name,
            retryCount: job.retryCount,
            signal: AbortSignal.any([stopping.signal, job.signal]),
          });
          results.push({ id: job.id, status: 'completed' });
        } catch (err) {
          const willRetry = job.retryCount < job.retryLimit;
          log.warn(
            { err, job: job.id, queue: def.name, retryCount: job.retryCount, willRetry },
            'job failed',
          );
          if (willRetry) wakeForRetry(def, job.retryCount);
          results.push({
            id: job.id,
            status: 'failed',
            output: { message: err instanceof Error ? err.message : String(err) },
          });
        }
      }
    } finally {
      running--;
      // There may be more: fetch again at once rather than after the polling interval.
      if (!stopping.signal.aborted) for (const id of workers.get(def.name) ?? []) boss.notifyWorker(id);
    }
    return results;
  }

  /**
   * Wakes the queue's workers when a failed job's retry falls due (pg-boss: `retryDelaySeconds` later, or with
   * `retryBackoff` between 2^n and 2^(n+1) times that after the n-th retry): at both ends of that window.
   */
  function wakeForRetry(def: JobDefinition<never>, retryCount: number) {
    const delayMs = (def.retryDelaySeconds ?? 1) * 1000;
    if (!def.retryBackoff) return notify(def.name, delayMs);
    const base = Math.max(delayMs, 1000) * 2 ** Math.min(16, retryCount);
    notify(def.name, base);
    notify(def.name, 2 * base);
  }

  function notify(name: string, afterMs = 0) {
    const wake = () => {
      if (!stopping.signal.aborted) for (const id of workers.get(name) ?? []) boss.notifyWorker(id);
    };
    if (afterMs <= 0) wake();
    // A little after it falls due: pg-boss compares the job's start time with the database's clock. Later than
    // a minute, the next poll is soon enough.
    else if (afterMs < 60_000) setTimeout(wake, afterMs + DUE_MARGIN_MS).unref();
  }

  async function stopNow(timeoutMs: number) {
    stopping.abort();
    if (state === 'started' || state === 'starting') {
      // Waits for the running batches (up to the timeout), fails the jobs still held then (retried per their
      // `retryLimit`), and closes the pool.
      await boss.stop({ graceful: true, timeout: timeoutMs, close: true });
      if (running > 0) log.warn({ running }, 'job queue stopped with handlers still running');
    }
    state = 'stopped';
  }

  return {
    define(def) {
      if (state !== 'new') throw new Error(`job ${def.name} defined after start`);
      if (defs.has(def.name)) throw new Error(`job ${def.name} defined twice`);
      // Kept without its data type (the handler and the schema agree on it).
      defs.set(def.name, def as unknown as JobDefinition<never>);
    },

    async send(job, data, opts = {}) {
      const name = job.name;
      if (!defs.has(name)) throw new Error(`unknown job ${name}`);
      if (state === 'new') throw new Error(`job ${name} sent before the job queue started`);
      if (state === 'stopped' || stopping.signal.aborted)
        throw new Error(`job ${name} sent after the job queue stopped`);
      const checked = defs.get(name)!.payload?.safeParse(data);
      if (checked && !checked.success) throw payloadError(name, checked.error);
      const options: BossSendOptions = {};
      if (opts.delayMs && opts.delayMs > 0) options.startAfter = new Date(Date.now() + opts.delayMs);
      if (opts.singletonKey) options.singletonKey = opts.singletonKey;
      if (opts.em) options.db = emExecutor(opts.em);
      const id = await boss.send(name, data, options);
      // Sent outside a transaction, the job is there now; one sent inside is there once the outermost commits.
      // (A transaction whose em's event manager lacks the subscriber is not seen: the wake is then now, and a job
      // not yet committed is found by a later poll.)
      const ctx = opts.em?.getTransactionContext<object>();
      const delayMs = opts.delayMs ?? 0;
      if (!ctx || !afterCommit.add(ctx, `${name}:${delayMs}`, () => notify(name, delayMs)))
        notify(name, delayMs);
      return id;
    },

    async start() {
      if (state !== 'new') throw new Error('job queue already started');
      state = 'starting';
      // Creates the schema, or migrates one made by an older pg-boss in place
      // (docs/jobs.md, "Upgrading from pg-boss 11").
      await boss.start();
      for (const def of defs.values()) {
        const queueOptions = {
          retryLimit: def.retryLimit ?? 0,
          retryDelay: def.retryDelaySeconds ?? 1,
          retryBackoff: def.retryBackoff ?? false,
          expireInSeconds: maxRunOf(def),
          heartbeatSeconds: JOB_HEARTBEAT_SECONDS,
        };
        // createQueue keeps an existing queue as it is: apply the current definition to it.
        // (pg-boss adds its defaults to the options object it is given: each call gets a copy.)
        await boss.createQueue(def.name, { ...queueOptions });
        await boss.updateQueue(def.name, { ...queueOptions });
        // A job takes its queue's expiry and heartbeat when it is sent. Jobs queued before (by pg-boss 11, which
        // had no heartbeat, on the short expiry that stood for a lease then) are brought to the current ones.
        await executeSql(
          `update ${SCHEMA}.job set expire_seconds = $2::int, heartbeat_seconds = $3::int
            where name = $1 and state < 'active'
              and (expire_seconds <> $2::int or heartbeat_seconds is distinct from $3::int)`,
          [def.name, maxRunOf(def), JOB_HEARTBEAT_SECONDS],
        );
        if (def.cron) await boss.schedule(def.name, def.cron, {}, { tz: 'UTC' });
      }
      for (const def of defs.values()) {
        // One pg-boss worker per slot (rather than its `localConcurrency`, which returns the id of the first
        // only): `notify` wakes each of them, so an idle one takes a new job while another is busy. Only the
        // first polls at the queue's interval; the others, woken by this process's sends and by each finished
        // batch, poll ten times less often, so that an idle server does not query for every slot.
        const ids: string[] = [];
        const polling = def.pollingIntervalSeconds ?? DEFAULT_POLLING_SECONDS;
        for (let i = 0; i < Math.max(1, def.concurrency ?? 1); i++) {
          ids.push(
            await boss.work(
              def.name,
              {
                batchSize: def.batchSize ?? 1,
                pollingIntervalSeconds: i === 0 ? polling : polling * 10,
                heartbeatRefreshSeconds: JOB_HEARTBEAT_REFRESH_SECONDS,
                includeMetadata: true,
                perJobResults: true,
              },
              (jobs: JobWithMetadata<object>[]) => runBatch(def, jobs),
            ),
          );
        }
        workers.set(def.name, ids);
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

    notify,

    async getJob(name, id) {
      const [job] = await boss.findJobs<unknown>(name, { id });
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

  /** One statement of this module's own on pg-boss's connection. */
  function executeSql(text: string, values: unknown[]) {
    return boss.getDb().executeSql(text, values);
  }
}
