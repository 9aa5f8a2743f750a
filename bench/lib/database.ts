import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';

/** The name of a bench's own database in `url`, checked: never `test`, `postgres` or a template. */
function benchDatabaseName(url: string): string {
  const name = decodeURIComponent(new URL(url).pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_]+$/.test(name))
    throw new Error(`bench database name must be [A-Za-z0-9_]+, got "${name}"`);
  if (['test', 'postgres', 'template0', 'template1'].includes(name)) {
    throw new Error(
      `the bench drops its database; refusing to use "${name}" (choose a dedicated one such as bench)`,
    );
  }
  return name;
}

/** Runs `statements` on the server of `url`, connected to its `postgres` database. */
async function onServer(url: string, statements: string[]): Promise<void> {
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    for (const sql of statements) await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Drops and creates the bench's own PostgreSQL database, so every run starts empty. */
export async function recreatePostgresDatabase(url: string): Promise<void> {
  const name = benchDatabaseName(url);
  await onServer(url, [`drop database if exists "${name}" with (force)`, `create database "${name}"`]);
}

/** Drops a database that recreatePostgresDatabase made (same rules for its name). */
export async function dropPostgresDatabase(url: string): Promise<void> {
  await onServer(url, [`drop database if exists "${benchDatabaseName(url)}" with (force)`]);
}

const UPGRADE_SQL = `update organizations set plan = 'enterprise'`;

/**
 * Moves every organization (the bench's one) to the enterprise plan, whose API-call quota is unlimited, while no
 * server is running on the database. Plan changes have no API yet, so this is plain SQL on the documented column.
 */
export async function upgradeAllToEnterprise(
  db: { kind: 'postgresql'; url: string } | { kind: 'pglite'; dir: string },
): Promise<number> {
  if (db.kind === 'postgresql') {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      return (await client.query(UPGRADE_SQL)).rowCount ?? 0;
    } finally {
      await client.end();
    }
  }
  const lite = await PGlite.create(db.dir);
  try {
    return (await lite.query(UPGRADE_SQL)).affectedRows ?? 0;
  } finally {
    await lite.close();
  }
}
