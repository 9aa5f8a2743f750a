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
  const url = new URL(process.env.DATABASE_URL!);
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
