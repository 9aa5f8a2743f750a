import { resolve } from 'node:path';
import { MikroORM, UnderscoreNamingStrategy, type Options } from '@mikro-orm/core';
import { Migrator } from '@mikro-orm/migrations';
import type { EntityManager, AbstractSqlDriver } from '@mikro-orm/sql';
import type { PGlite } from '@electric-sql/pglite';
import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import { ensurePrivateDir } from '../lib/secret-file.js';

export type Em = EntityManager<AbstractSqlDriver>;

export interface Database {
  orm: MikroORM<AbstractSqlDriver>;
  kind: 'pglite' | 'postgresql';
  /** The embedded instance, when running on PGlite (shared with the job queue: it has one connection). */
  pglite: PGlite | undefined;
  /**
   * A read on the hot path (every authenticated request). On PostgreSQL it is a named prepared statement on the
   * ORM's own pool, planned once per connection; on PGlite it goes through the ORM's connection, which serialises
   * it with open transactions on the single connection.
   */
  preparedQuery<T>(name: string, text: string, values: unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  databaseUrl: string | undefined;
  /** Directory for the embedded database, or `memory://` for an in-memory one (tests). */
  pgliteDataDir: string;
  /**
   * What an in-memory PGlite starts from instead of an empty cluster: a `dumpDataDir()` of a database already
   * migrated (the tests' template, docs/development.md, "Tests"). The migrations still run; those in it are skipped.
   */
  pgliteInitialData?: Blob;
  entities: NonNullable<Options['entities']>;
  /** Every migration, in order (the modules' manifests list theirs: server/modules.ts). */
  migrations: NonNullable<NonNullable<Options['migrations']>['migrationsList']>;
  debug?: boolean;
  poolMax?: number;
}

/**
 * Names foreign keys as PostgreSQL does by default (`<table>_<columns>_fkey`), which is what the migrations'
 * inline `references` clauses produced; other constraint and index names keep the ORM's defaults, which the
 * migrations spell out.
 */
class MigrationsNamingStrategy extends UnderscoreNamingStrategy {
  override indexName(
    tableName: string,
    columns: string[],
    type: Parameters<UnderscoreNamingStrategy['indexName']>[2],
  ) {
    if (type === 'foreign') return `${tableName}_${columns.join('_')}_fkey`;
    return super.indexName(tableName, columns, type);
  }
}

/**
 * Tables in the application's schema that have no entity on purpose, left out of the ORM's schema diff (and so out
 * of any migration the MikroORM CLI would generate). The job queue's tables live in their own `pgboss` schema, which
 * the diff never reads.
 */
export const UNMODELLED_TABLES = [
  // API usage counters: written and read only with raw batched upserts and sums (limits/api-usage.ts).
  'api_calls_daily',
  // List totals: maintained by the triggers of migration 30 (list_counts), read with raw sums (db/list-counts.ts).
  'list_counts',
];

/**
 * The ORM options for the configured database. Each driver is imported only when it is the one in use: the embedded
 * one weighs tens of megabytes that a server on PostgreSQL has no use for.
 */
export async function ormOptions(opts: DatabaseOptions, pglite?: PGlite): Promise<Partial<Options>> {
  const common: Partial<Options> = {
    entities: opts.entities,
    allowGlobalContext: false,
    forceUtcTimezone: true,
    debug: opts.debug ?? false,
    extensions: [Migrator],
    migrations: {
      migrationsList: opts.migrations,
      snapshot: false,
      transactional: true,
      allOrNothing: true,
      silent: true,
    },
    // The entities describe exactly what the migrations create (tests/db/schema-drift.test.ts checks it).
    namingStrategy: MigrationsNamingStrategy,
    schemaGenerator: {
      // Every foreign key of the migrations is `on update cascade`; the delete rule is set per relation.
      defaultUpdateRule: 'cascade',
      skipTables: UNMODELLED_TABLES,
      // The only triggers are the list counts' (migration 30, list_counts), written as SQL and checked by
      // tests/db/list-counts.test.ts: the entities do not describe them.
      ignoreTriggers: true,
    },
    // Entity metadata comes from defineEntity; no reflection or discovery cache needed.
    metadataCache: { enabled: false },
  };
  if (opts.databaseUrl) {
    const { PostgreSqlDriver } = await import('@mikro-orm/postgresql');
    return {
      ...common,
      driver: PostgreSqlDriver,
      clientUrl: opts.databaseUrl,
      pool: { min: 0, max: opts.poolMax ?? 10 },
    } as Partial<Options>;
  }
  const { PgliteDriver } = await import('@mikro-orm/pglite');
  return {
    ...common,
    driver: PgliteDriver,
    dbName: 'platform',
    driverOptions: { pglite },
  } as Partial<Options>;
}

/** Opens the database (PostgreSQL when a URL is given, embedded PGlite otherwise) and applies migrations. */
export async function openDatabase(opts: DatabaseOptions): Promise<Database> {
  let pglite: PGlite | undefined;
  if (!opts.databaseUrl) {
    const dir = opts.pgliteDataDir;
    // 0700, DATA_DIR included when it is created here (docs/security.md).
    if (!dir.startsWith('memory://')) ensurePrivateDir(dir);
    const { PGlite } = await import('@electric-sql/pglite');
    pglite = dir.startsWith('memory://')
      ? await PGlite.create(opts.pgliteInitialData ? { loadDataDir: opts.pgliteInitialData } : undefined)
      : await PGlite.create(resolve(dir));
  }
  const orm = (await MikroORM.init(await ormOptions(opts, pglite))) as MikroORM<AbstractSqlDriver>;
  await orm.migrator.up();
  let preparedQuery: Database['preparedQuery'];
  if (pglite) {
    const client = orm.em.getConnection().getClient<unknown>();
    preparedQuery = async <T>(_name: string, text: string, values: unknown[]) =>
      (await client.executeQuery<T>(CompiledQuery.raw(text, values))).rows;
  } else {
    const pool = (await orm.em.getConnection().getNativeClient()) as pg.Pool;
    preparedQuery = async <T>(name: string, text: string, values: unknown[]) =>
      (await pool.query({ name, text, values })).rows as T[];
  }
  return {
    orm,
    kind: pglite ? 'pglite' : 'postgresql',
    pglite,
    preparedQuery,
    async close() {
      await orm.close(true);
      if (pglite && !pglite.closed) await pglite.close();
    },
  };
}
