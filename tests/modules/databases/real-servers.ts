import mysql from 'mysql2/promise';
import pg from 'pg';
import { testConfig } from '../../support/env.js';
import { ownPostgresDatabase } from '../../support/scratch-database.js';
import { startTestServer } from '../../support/server.js';

/**
 * What the tests of real databases share (docs/databases.md, "Databases", Real servers): the admin connections of
 * this machine's servers (PostgreSQL at 127.0.0.1:5432, MariaDB at 127.0.0.1:3306), whether they answer, and an API
 * server on them.
 */

export const PG_ADMIN = 'postgres://postgres@127.0.0.1:5432/postgres';
export const MYSQL_ADMIN = 'mysql://root@127.0.0.1:3306/';

/** The rows of `text` run as PostgreSQL's admin, in `database`. */
export async function pgAdmin<T extends pg.QueryResultRow>(
  text: string,
  params: unknown[] = [],
  database = 'postgres',
): Promise<T[]> {
  const c = new pg.Client({
    connectionString: PG_ADMIN.replace(/\/postgres$/, `/${database}`),
    connectionTimeoutMillis: 3000,
  });
  await c.connect();
  try {
    return (await c.query<T>(text, params)).rows;
  } finally {
    await c.end();
  }
}

/** Opens a client with a connection string as the API returned it; throws when it cannot. */
export async function pgConnect(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  // A session the server ends (reset-password, removal) must not fail the run.
  c.on('error', () => {});
  await c.connect();
  return c;
}

/** Why PostgreSQL's admin cannot run a query; null when it can. */
export async function pgAnswers(): Promise<Error | null> {
  return pgAdmin('select 1').then(
    () => null,
    (err: Error) => err,
  );
}

/** Why MariaDB's root cannot connect; null when it can. */
export async function mysqlAnswers(): Promise<Error | null> {
  try {
    const c = await mysql.createConnection({
      host: '127.0.0.1',
      port: 3306,
      user: 'root',
      connectTimeout: 3000,
    });
    await c.end();
    return null;
  } catch (err) {
    return err as Error;
  }
}

/**
 * An API server on the real database servers `hosts`. On PostgreSQL it has a database of its own: its jobs
 * (provisioning, backups, storage checks) must not be taken by another test server on the run's database, whose
 * driver is the simulated one.
 */
export async function realServer(
  hosts: string,
  backupDir: string,
  extra: Record<string, string | undefined> = {},
) {
  const scratch = await ownPostgresDatabase(`db_real_${Math.random().toString(36).slice(2, 8)}`);
  const server = await startTestServer({
    config: testConfig({
      DATABASE_URL: scratch?.url ?? process.env.DATABASE_URL,
      DATABASE_HOSTS: hosts,
      BACKUP_DIR: backupDir,
      DATABASE_DELETION_GRACE: '3s',
      PROVISIONING_DELAY_MS: '100',
      ...extra,
    }),
  });
  const close = server.close.bind(server);
  server.close = async () => {
    await close();
    await scratch?.drop();
  };
  return server;
}
