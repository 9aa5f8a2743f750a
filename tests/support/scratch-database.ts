import pg from 'pg';
import { usingPostgres } from './env.js';

/** A PostgreSQL database of a test's own, and how to drop it. */
export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

/** One statement on another database of the server (`create database` cannot run in the tests' own). */
async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * On PostgreSQL, an empty database of the test's own next to the run's one (`<run database>_<suffix>`), for servers
 * that must not share the run's job queue (restarts, fake clocks, other settings); undefined on PGlite, where every
 * test server has its own database anyway.
 */
export async function ownPostgresDatabase(suffix: string): Promise<ScratchDatabase | undefined> {
  if (!usingPostgres) return undefined;
  return createScratch(new URL(process.env.DATABASE_URL!), suffix);
}

/**
 * As ownPostgresDatabase, for tests that need PostgreSQL on both passes (several server processes on one database):
 * on the PGlite pass, on the PostgreSQL at TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * named with this process's id so that runs side by side do not meet.
 */
export async function ownPostgresDatabaseOnEveryPass(suffix: string): Promise<ScratchDatabase> {
  return (
    (await ownPostgresDatabase(suffix)) ??
    createScratch(
      new URL(process.env.TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres'),
      `${suffix}_${process.pid}`,
    )
  );
}

async function createScratch(url: URL, suffix: string): Promise<ScratchDatabase> {
  const name = `${url.pathname.slice(1)}_${suffix}`;
  const admin = new URL(url);
  admin.pathname = '/postgres';
  await adminQuery(admin.href, `drop database if exists "${name}" with (force)`);
  await adminQuery(admin.href, `create database "${name}"`);
  url.pathname = `/${name}`;
  return {
    url: url.href,
    drop: () => adminQuery(admin.href, `drop database if exists "${name}" with (force)`),
  };
}
