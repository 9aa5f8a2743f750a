import type { Database, Em } from '../../db/orm.js';
import type { PageRequest } from '../../lib/pagination.js';
import { epochMs, findRawPage, fromEpochMs as ms, type RawPageSpec } from '../../db/raw-page.js';
import {
  DATABASE_ENGINES,
  DATABASE_REGIONS,
  DATABASE_STATUSES,
  type DatabaseEngine,
  type DatabaseRegion,
  type DatabaseSize,
  type DatabaseStatus,
} from './databases.constants.js';
import type { DatabaseView } from './databases.dto.js';

/**
 * The database list is the module's hot read: one prepared round trip for the page and its total, rows mapped straight
 * to the list view (server/db/raw-page.ts). Everything else goes through the ORM.
 */

/** The list's columns, and the filter keys (access/scope.ts: ownedBy, ownedListFilter; the list filters) it takes. */
const LIST: RawPageSpec = {
  table: 'databases',
  select: `
    id, name, engine, version, status, region, size, host, port, server, ssl_required, db_name, db_user,
    multi_az, backup_enabled,
    backup_retention, user_id, ${epochMs('created_at')} as created_ms,
    ${epochMs('updated_at')} as updated_ms, ${epochMs('last_backup_at')} as last_backup_ms,
    ${epochMs('next_backup_at')} as next_backup_ms,
    ${epochMs('deletion_scheduled_at')} as deletion_scheduled_ms`,
  columns: {
    organization: 'organization_id',
    user: 'user_id',
    engine: 'engine',
    status: 'status',
    region: 'region',
  },
  always: ['"removed_at" is null'],
  counts: {
    list: 'databases',
    scope: 'organization',
    owner: 'user',
    dims: [
      { key: 'engine', values: DATABASE_ENGINES },
      { key: 'status', values: DATABASE_STATUSES },
      { key: 'region', values: DATABASE_REGIONS },
    ],
  },
};

interface ListRow {
  id: string;
  name: string;
  engine: DatabaseEngine;
  version: string;
  status: DatabaseStatus;
  region: DatabaseRegion;
  size: DatabaseSize;
  host: string;
  port: number | null;
  server: string | null;
  ssl_required: boolean;
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

function toView(r: ListRow): DatabaseView {
  return {
    id: r.id,
    name: r.name,
    engine: r.engine,
    version: r.version,
    status: r.status,
    region: r.region,
    size: r.size,
    host: r.host,
    port: r.port,
    server: r.server,
    sslRequired: r.ssl_required,
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

/** One page of the databases matching `filter` (already scoped), newest first, with the total. */
export async function findDatabasePage(
  em: Em,
  db: Database,
  filter: Record<string, unknown>,
  page: PageRequest,
): Promise<{ items: DatabaseView[]; total: number; hasMore: boolean }> {
  const found = await findRawPage<ListRow>(em, db, LIST, filter, page);
  return { total: found.total, hasMore: found.hasMore, items: found.rows.map(toView) };
}
