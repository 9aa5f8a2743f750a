import type { Database, Em } from '../../db/orm.js';
import type { PageRequest } from '../../lib/pagination.js';
import { epochMs, findRawPage, fromEpochMs as ms, type RawPageSpec } from '../../db/raw-page.js';
import {
  CONNECTION_STATUSES,
  VPN_LOCATIONS,
  VPN_PROTOCOLS,
  type ConnectionStatus,
  type VpnProtocol,
} from './vpn.constants.js';
import type { ConnectionView } from './vpn.dto.js';

/**
 * The connection list is the module's hot read: one prepared round trip for the page and its total, rows mapped straight
 * to the list view (server/db/raw-page.ts). Everything else goes through the ORM.
 */

/** The list's columns, and the filter keys (access/scope.ts: ownedBy, ownedListFilter, inOrganization; the list filters) it takes. */
const LIST: RawPageSpec = {
  table: 'vpn_connections',
  select: `
    id, name, status, status_message, location, protocol, server_id, user_id, auto_connect,
    ${epochMs('created_at')} as created_ms, ${epochMs('updated_at')} as updated_ms,
    ${epochMs('connected_at')} as connected_ms, ${epochMs('last_activity')} as last_activity_ms,
    upload_bytes, download_bytes, session_upload_base, session_download_base, upload_rate, download_rate`,
  columns: {
    organization: 'organization_id',
    user: 'user_id',
    status: 'status',
    protocol: 'protocol',
    location: 'location',
  },
  counts: {
    list: 'vpn_connections',
    scope: 'organization',
    owner: 'user',
    dims: [
      { key: 'status', values: CONNECTION_STATUSES },
      { key: 'protocol', values: VPN_PROTOCOLS },
      { key: 'location', values: VPN_LOCATIONS },
    ],
  },
};

interface ListRow {
  id: string;
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

function toView(r: ListRow): ConnectionView {
  return {
    id: r.id,
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

/** One page of connections matching `filter` (already scoped), newest first, with the total. */
export async function findConnectionPage(
  em: Em,
  db: Database,
  filter: Record<string, unknown>,
  page: PageRequest,
): Promise<{ items: ConnectionView[]; total: number; hasMore: boolean }> {
  const found = await findRawPage<ListRow>(em, db, LIST, filter, page);
  return { total: found.total, hasMore: found.hasMore, items: found.rows.map(toView) };
}
