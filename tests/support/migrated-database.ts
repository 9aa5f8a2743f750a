import { openDatabase, type Database } from '../../server/db/orm.js';
import { buildRegistry } from '../../server/kit/registry.js';
import { modules } from '../../server/modules.js';

/** A job queue's logger that says nothing (the tests assert what the queue does, not what it logs). */
export const quietLog = { error() {}, warn() {} };

/**
 * The API's database opened as the server opens it, every module's migrations applied: the run's PostgreSQL
 * (`DATABASE_URL`) or an in-memory PGlite of its own.
 */
export function openMigratedDatabase(): Promise<Database> {
  const { entities, migrations } = buildRegistry(modules);
  return openDatabase({
    databaseUrl: process.env.DATABASE_URL,
    pgliteDataDir: 'memory://',
    entities: [...entities],
    migrations: [...migrations],
  });
}
