import { CompiledQuery, type Transaction } from 'kysely';
import PgBoss from 'pg-boss';
import type { Database, Em } from '../db/orm.js';

export interface JobInfo {
  id: string;
  name: string;
  retryCount: number;
}

export type JobHandler<T> = (data: T, job: JobInfo) => Promise<void>;

export interface JobDefinition<T> {
  name: string;
  handler: JobHandler<T>;
  /** Cron expression (UTC) for recurring jobs. */
  cron?: string;
  /** Attempts after the first failure; 0 by default (handlers decide their own retry policy). */
  retryLimit?: number;
  retryDelaySeconds?: number;
  /** Jobs fetched per poll. */
  batchSize?: number;
  pollingIntervalSeconds?: number;
}

export interface SendOptions {
  /** Run no sooner than this many milliseconds from now. */
  delayMs?: number;
  /** At most one queued job per key and queue. */
  singletonKey?: string;
  /**
   * Enqueue inside this EntityManager's transaction, so the job exists exactly when the change that needs it
   * commits (a crash between the two cannot lose it).
   */
  em?: Em;
}

/** The durable job queue: Postgres-backed (pg-boss), on PGlite and PostgreSQL alike. */
export interface JobQueue {
  define<T extends object>(def: JobDefinition<T>): void;
  send<T extends object>(name: string, data: T, opts?: SendOptions): Promise<string | null>;
  start(): Promise<void>;
  /** Stops fetching, waits for running handlers to finish their current step, then resolves. */
  stop(timeoutMs?: number): Promise<void>;
  /** Wakes the workers of a queue now instead of at their next poll. */
  notify(name: string): void;
}

const SCHEMA = 'pgboss';

function emExecutor(em: Em): PgBoss.Db {
  return {
    async executeSql(text, values) {
      // em.execute() inlines `?` placeholders and drops the values of pg-boss's `$1` ones: send the query to the
      // driver as it is, on the transaction's connection when there is one.
      const runner = em.getTransactionContext<Transaction<unknown>>() ?? em.getConnection().getClient();
      const result = await runner.executeQuery(CompiledQuery.raw(text, values ?? []));
      return { rows: result.rows as unknown[] };
    },
  };
}

export function createJobQueue(db: Database, log: { error(o: object, m?: string): void }): JobQueue {
  let adapter: PgBoss.Db | undefined;
  if (db.pglite) {
    const pg = db.pglite;
    adapter = {
      // pg-boss sends its schema scripts as several statements without parameters: PGlite runs those with exec().
      async executeSql(text, values) {
        if (!values || values.length === 0) {
          const results = await pg.exec(text);
          return { rows: results.flatMap((r) => r.rows) };
        }
        const r = await pg.query(text, values);
        return { rows: r.rows };
      },
    };
  }
  const boss = adapter
    ? new PgBoss({ db: adapter, schema: SCHEMA, superviseIntervalSeconds: 60 })
    : new PgBoss({ connectionString: connectionStringOf(db), schema: SCHEMA, max: 4 });
  boss.on('error', (err) => log.error({ err }, 'job queue error'));

  const defs = new Map<string, JobDefinition<never>>();
  const workerIds = new Map<string, string>();
  let started = false;

  return {
    define(def) {
      if (started) throw new Error(`job ${def.name} defined after start`);
      defs.set(def.name, def as JobDefinition<never>);
    },
    async send(name, data, opts = {}) {
      const options: PgBoss.SendOptions = {};
      if (opts.delayMs && opts.delayMs > 0) options.startAfter = new Date(Date.now() + opts.delayMs);
      if (opts.singletonKey) options.singletonKey = opts.singletonKey;
      if (opts.em) options.db = emExecutor(opts.em);
      return boss.send(name, data, options);
    },
    async start() {
      await boss.start();
      for (const def of defs.values()) {
        await boss.createQueue(def.name, {
          retryLimit: def.retryLimit ?? 0,
          retryDelay: def.retryDelaySeconds ?? 1,
        });
        if (def.cron) await boss.schedule(def.name, def.cron, {}, { tz: 'UTC' });
        const id = await boss.work<object>(
          def.name,
          {
            batchSize: def.batchSize ?? 1,
            pollingIntervalSeconds: def.pollingIntervalSeconds ?? 0.5,
            includeMetadata: true,
          },
          async (jobs) => {
            for (const job of jobs) {
              await (def.handler as JobHandler<object>)(job.data, {
                id: job.id,
                name: job.name,
                retryCount: job.retryCount,
              });
            }
          },
        );
        workerIds.set(def.name, id);
      }
      started = true;
    },
    async stop(timeoutMs = 10_000) {
      if (!started) return;
      started = false;
      await boss.stop({ graceful: true, wait: true, close: !adapter, timeout: timeoutMs });
    },
    notify(name) {
      const id = workerIds.get(name);
      if (id) boss.notifyWorker(id);
    },
  };
}

function connectionStringOf(db: Database): string {
  const url = db.orm.config.get('clientUrl');
  if (!url) throw new Error('PostgreSQL job queue needs the database URL');
  return url;
}
