import { CompiledQuery, type Transaction } from 'kysely';
import type { Em } from '../../db/orm.js';
import type { DatabaseEngine, DatabaseRegion, DatabaseSize, DatabaseStatus } from './databases.constants.js';
import type { DatabaseView } from './databases.dto.js';

/**
 * The database list is the module's hot read: one round trip (total and page together) and rows mapped straight to
 * the list view, without hydrating entities into the identity map. Everything else goes through the ORM.
 */

/** Columns of a filter from access/scope.ts (ownedBy, ownedListFilter) and the list filters. */
const COLUMNS: Record<string, string> = {
  organization: 'organization_id',
  user: 'user_id',
  engine: 'engine',
  status: 'status',
  region: 'region',
};

/**
 * Turns a scope filter plus list filters into SQL. Understands equality on the known columns and the scope
 * helpers' "nothing" (`id: {$in: []}`); anything else is a programming error. Removed databases never match.
 */
function whereClause(filter: Record<string, unknown>): { sql: string; params: unknown[] } | null {
  const parts: string[] = ['"removed_at" is null'];
  const params: unknown[] = [];
  for (const [key, value] of Object.entries(filter)) {
    const $in =
      key === 'id' && value && typeof value === 'object' ? (value as { $in?: unknown }).$in : undefined;
    if (Array.isArray($in) && $in.length === 0) return null;
    const column = COLUMNS[key];
    if (!column || typeof value !== 'string') throw new Error(`unsupported list filter ${key}`);
    params.push(value);
    parts.push(`"${column}" = $${params.length}`);
  }
  return { sql: parts.join(' and '), params };
}

interface ListRow {
  total: number | string;
  id: string | null;
  name: string;
  engine: DatabaseEngine;
  version: string;
  status: DatabaseStatus;
  region: DatabaseRegion;
  size: DatabaseSize;
  host: string;
  db_name: string;
  db_user: string;
  multi_az: boolean;
  backup_enabled: boolean;
  backup_retention: number;
  user_id: string;
  created_ms: number | string;
  updated_ms: number | string;
  last_backup_ms: number | string | null;
  next_backup_ms: number | string | null;
  deletion_scheduled_ms: number | string | null;
}

const ms = (v: number | string | null): Date | null => (v === null ? null : new Date(Number(v)));

function toView(r: ListRow): DatabaseView {
  return {
    id: r.id!,
    name: r.name,
    engine: r.engine,
    version: r.version,
    status: r.status,
    region: r.region,
    size: r.size,
    host: r.host,
    dbName: r.db_name,
    dbUser: r.db_user,
    multiAz: r.multi_az,
    backupEnabled: r.backup_enabled,
    backupRetention: r.backup_retention,
    user: { id: r.user_id },
    createdAt: ms(r.created_ms)!,
    updatedAt: ms(r.updated_ms)!,
    lastBackupAt: ms(r.last_backup_ms),
    nextBackupAt: ms(r.next_backup_ms),
    deletionScheduledAt: ms(r.deletion_scheduled_ms),
  };
}

const epochMs = (column: string) => `(extract(epoch from "${column}") * 1000)::float8`;

/** One page of the databases matching `filter` (already scoped), newest first, with the total. */
export async function findDatabasePage(
  em: Em,
  filter: Record<string, unknown>,
  page: { page: number; limit: number },
): Promise<{ items: DatabaseView[]; total: number }> {
  const where = whereClause(filter);
  if (!where) return { items: [], total: 0 };
  const n = where.params.length;
  const sql = `
    select t.total, p.*
      from (select count(*) as total from databases where ${where.sql}) t
      left join lateral (
        select id, name, engine, version, status, region, size, host, db_name, db_user, multi_az, backup_enabled,
               backup_retention, user_id, ${epochMs('created_at')} as created_ms,
               ${epochMs('updated_at')} as updated_ms, ${epochMs('last_backup_at')} as last_backup_ms,
               ${epochMs('next_backup_at')} as next_backup_ms,
               ${epochMs('deletion_scheduled_at')} as deletion_scheduled_ms
          from databases
         where ${where.sql}
         order by created_at desc, id desc
         limit $${n + 1} offset $${n + 2}
      ) p on true`;
  const runner = em.getTransactionContext<Transaction<unknown>>() ?? em.getConnection().getClient();
  const result = await runner.executeQuery<ListRow>(
    CompiledQuery.raw(sql, [...where.params, page.limit, (page.page - 1) * page.limit]),
  );
  const rows = result.rows;
  return {
    total: Number(rows[0]?.total ?? 0),
    items: rows.filter((r) => r.id !== null).map(toView),
  };
}
