import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { Event } from '../../../server/events/event.entity.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import { ManagedDatabase } from '../../../server/modules/databases/database.entity.js';
import { DatabaseBackup } from '../../../server/modules/databases/database-backup.entity.js';
import { http, type HttpResult } from '../../support/http.js';
import { waitFor } from '../../support/wait.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let seq = 0;
/** A database name no other test of the run uses. */
export function dbName(label = 'db'): string {
  seq += 1;
  return `${label}-${process.pid.toString(36)}-${seq}`;
}

export function createDatabase(
  baseUrl: string,
  token: string,
  body: Record<string, unknown> = {},
): Promise<HttpResult> {
  return http(baseUrl, 'POST', '/v1/databases', {
    token,
    body: { name: dbName(), engine: 'postgresql', ...body },
  });
}

export function getDatabase(baseUrl: string, token: string, id: string): Promise<HttpResult> {
  return http(baseUrl, 'GET', `/v1/databases/${id}`, { token });
}

/** Waits until the database shows `status` (GET), and returns its detail view. */
export async function waitStatus(baseUrl: string, token: string, id: string, status: string) {
  return waitFor(`the database to be ${status}`, async () => {
    const res = await getDatabase(baseUrl, token, id);
    return res.body.database?.status === status ? res.body.database : undefined;
  });
}

/** Waits until the backup is `completed`, and returns it (as the backup list shows it). */
export async function waitBackupCompleted(
  baseUrl: string,
  token: string,
  databaseId: string,
  backupId: string,
) {
  return waitFor('the backup to complete', async () => {
    const res = await http(baseUrl, 'GET', `/v1/databases/${databaseId}/backups?limit=100`, { token });
    const b = (res.body.backups ?? []).find((x: { id: string }) => x.id === backupId);
    return b?.status === 'completed' ? b : undefined;
  });
}

/** Creates a database and waits until it is running; returns the create response body's database. */
export async function runningDatabase(baseUrl: string, token: string, body: Record<string, unknown> = {}) {
  const created = await createDatabase(baseUrl, token, body);
  if (created.status !== 201) throw new Error(`create answered ${created.status}: ${created.text}`);
  await waitStatus(baseUrl, token, created.body.database.id, 'running');
  return created.body.database;
}

export async function eventsOf(deps: AppDeps, organizationId: string, type?: string): Promise<Event[]> {
  return deps.db.orm.em
    .fork()
    .find(Event, { organizationId, ...(type ? { type } : {}) }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

/** Databases of the organization not removed (what the plan counts, plus those being deleted). */
export async function countDatabases(deps: AppDeps, organizationId: string): Promise<number> {
  return deps.db.orm.em.fork().count(ManagedDatabase, { organization: organizationId, removedAt: null });
}

export async function storedDatabase(deps: AppDeps, id: string): Promise<ManagedDatabase | null> {
  return deps.db.orm.em.fork().findOne(ManagedDatabase, id, { populate: ['passwordHash'] });
}

export async function storedBackups(deps: AppDeps, databaseId: string): Promise<DatabaseBackup[]> {
  return deps.db.orm.em
    .fork()
    .find(DatabaseBackup, { database: databaseId }, { orderBy: { createdAt: 'asc' } });
}

/** A PostgreSQL database of its own next to the run's one (`<run db>_<suffix>`), created empty; its URL. */
export async function scratchPostgres(suffix: string): Promise<ScratchDatabase> {
  const db = await ownPostgresDatabase(suffix);
  if (!db) throw new Error('scratchPostgres needs DATABASE_URL');
  return db;
}
