import { CompiledQuery, type Transaction } from 'kysely';
import type { Em } from '../../db/orm.js';
import type { ConnectionStatus, VpnProtocol } from './vpn.constants.js';
import type { ConnectionView } from './vpn.dto.js';

/**
 * The connection list is the module's hot read: one round trip (total and page together) and rows mapped straight
 * to the list view, without hydrating entities into the identity map. Everything else goes through the ORM.
 */

/** Columns of a filter from access/scope.ts (ownedBy, ownedListFilter, inOrganization) and the list filters. */
const COLUMNS: Record<string, string> = {
  organization: 'organization_id',
  user: 'user_id',
  status: 'status',
  protocol: 'protocol',
  location: 'location',
};

/**
 * Turns a scope filter plus list filters into SQL. Understands equality on the known columns and the scope
 * helpers' "nothing" (`id: {$in: []}`); anything else is a programming error.
 */
function whereClause(filter: Record<string, unknown>): { sql: string; params: unknown[] } | null {
  const parts: string[] = [];
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
  return { sql: parts.length ? parts.join(' and ') : 'true', params };
}

interface ListRow {
  total: number | string;
  id: string | null;
  name: string;
  status: ConnectionStatus;
  status_message: string | null;
  location: string;
  protocol: VpnProtocol;
  server_id: string;
  user_id: string;
  auto_connect: boolean;
  created_ms: number | string;
  updated_ms: number | string;
  connected_ms: number | string | null;
  last_activity_ms: number | string | null;
  upload_bytes: number | string;
  download_bytes: number | string;
  session_upload_base: number | string;
  session_download_base: number | string;
  upload_rate: number;
  download_rate: number;
}

const ms = (v: number | string | null): Date | null => (v === null ? null : new Date(Number(v)));

function toView(r: ListRow): ConnectionView {
  return {
    id: r.id!,
    name: r.name,
    status: r.status,
    statusMessage: r.status_message,
    location: r.location,
    protocol: r.protocol,
    server: { id: r.server_id },
    user: { id: r.user_id },
    autoConnect: r.auto_connect,
    createdAt: ms(r.created_ms)!,
    updatedAt: ms(r.updated_ms)!,
    connectedAt: ms(r.connected_ms),
    lastActivity: ms(r.last_activity_ms),
    uploadBytes: Number(r.upload_bytes),
    downloadBytes: Number(r.download_bytes),
    sessionUploadBase: Number(r.session_upload_base),
    sessionDownloadBase: Number(r.session_download_base),
    uploadRate: r.upload_rate,
    downloadRate: r.download_rate,
  };
}

const epochMs = (column: string) => `(extract(epoch from "${column}") * 1000)::float8`;

/** One page of connections matching `filter` (already scoped), newest first, with the total. */
export async function findConnectionPage(
  em: Em,
  filter: Record<string, unknown>,
  page: { page: number; limit: number },
): Promise<{ items: ConnectionView[]; total: number }> {
  const where = whereClause(filter);
  if (!where) return { items: [], total: 0 };
  const n = where.params.length;
  const sql = `
    select t.total, p.*
      from (select count(*) as total from vpn_connections where ${where.sql}) t
      left join lateral (
        select id, name, status, status_message, location, protocol, server_id, user_id, auto_connect,
               ${epochMs('created_at')} as created_ms, ${epochMs('updated_at')} as updated_ms,
               ${epochMs('connected_at')} as connected_ms, ${epochMs('last_activity')} as last_activity_ms,
               upload_bytes, download_bytes, session_upload_base, session_download_base, upload_rate, download_rate
          from vpn_connections
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
