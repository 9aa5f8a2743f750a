import { MikroOrmRepository } from '../../kit/repository.js';
import { LockMode, type FilterQuery, type RequiredEntityData } from '@mikro-orm/core';
import type { Actor } from '../../access/actor.js';
import { lockOwner } from '../../access/owned-resources.js';
import { ownedBy } from '../../access/scope.js';
import { User } from '../../access/user.entity.js';
import { countedRows } from '../../db/list-counts.js';
import type { Em } from '../../db/orm.js';
import type { Paged } from '../../db/pagination.js';
import { epochMs, findRawPage, fromEpochMs as ms, type RawPageSpec } from '../../db/raw-page.js';
import type { EventDefinition } from '../../events/define-event.js';
import { recordEventForAllOrganizations, recordPlatformEventFor } from '../../events/record-event.js';
import type { AppDeps } from '../../kit/deps.js';
import type { OrganizationRows } from '../../kit/module.js';
import {
  lockOrganizationPlan,
  lockPlanCounter,
  readOrganizationPlan,
  type OrganizationPlan,
} from '../../kit/plan-limit.js';
import type { PageRequest } from '../../lib/pagination.js';
import { VpnConnection, VpnConnectionSchema } from './vpn-connection.entity.js';
import { VpnServer, VpnServerSchema } from './vpn-server.entity.js';
import {
  CONNECTION_STATUSES,
  VPN_LOCATIONS,
  VPN_PROTOCOLS,
  type ConnectionStatus,
  type VpnLocation,
  type VpnProtocol,
} from './vpn.constants.js';
import type { ConnectionView } from './vpn.dto.js';

/**
 * Every read and write of the VPN module's tables (docs/adding-a-module.md, "Checklist", step 3): the services, the
 * jobs, the agent's routes and the manifest go through a {@link VpnRepository}, never through the ORM or SQL
 * themselves. The process gets the MikroORM one ({@link MikroOrmVpnRepository}) from the module's `create`
 * (`repositoryOf(deps, 'vpn')`).
 *
 * A unit of work is an `Em` to the caller: opaque, handed back to the repository (and to the kit's functions that
 * write in the same transaction, such as the job queue's `send`). Rows are the entities; a change to a row read in a
 * transaction is written when the transaction commits.
 */

/** The module's tables, from its entities (the manifest's lists and the SQL below name them from here). */
export const VPN_TABLES = {
  servers: VpnServerSchema.tableName,
  connections: VpnConnectionSchema.tableName,
} as const;

const T = VPN_TABLES;

/** A connection list's filter, already scoped (the caller's organization, a user's connections, the list's filters). */
export interface ConnectionListFilter {
  organizationId: string;
  userId?: string;
  /** A member asking for another user's connections: nothing matches. */
  none?: boolean;
  status?: ConnectionStatus;
  protocol?: VpnProtocol;
  location?: string;
}

/** What a new connection row holds (`connecting`, its first attempt; the rest is zero or null). */
export interface NewConnection {
  id: string;
  now: Date;
  organizationId: string;
  userId: string;
  serverId: string;
  name: string;
  location: string;
  protocol: VpnProtocol;
  autoConnect: boolean;
  clientPublicKey: string | null;
}

/** What a new server row holds (the columns with a default may be left out). */
export type NewServer = RequiredEntityData<VpnServer>;

/** The peers an agent server must hold (docs/vpn-servers.md): public keys and tunnel addresses only. */
export interface AgentPeers {
  version: number;
  peers: { public_key: string; allowed_ips: string[] }[];
}

export interface VpnRepository {
  // ---------- units of work ----------
  /** A fresh unit of work (jobs, the agent's requests, the sweep). */
  fork(): Em;
  /** Runs `work` in a transaction of `em` (committed when it returns, rolled back when it throws). */
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;
  /** Writes the changes of `tx` now (before the transaction's own statements that follow). */
  flush(tx: Em): Promise<void>;

  // ---------- connections ----------
  listConnections(em: Em, filter: ConnectionListFilter, page: PageRequest): Promise<Paged<ConnectionView>>;
  /** The connection `id` within the actor's scope (another organization's, or for a member another user's: null). */
  findConnection(
    em: Em,
    actor: Actor,
    id: string,
    opts?: { lock?: boolean; withServer?: boolean },
  ): Promise<VpnConnection | null>;
  /** The connection `id` with its row locked (`tx`), whoever owns it; null when gone. */
  lockConnection(tx: Em, id: string): Promise<VpnConnection | null>;
  /** The user's row, share-locked to the commit (a user deleted meanwhile cannot create: 401); run first in a create. */
  lockOwner(tx: Em, userId: string): Promise<void>;
  /** The organization's plan, share-locked to the commit (kit/plan-limit.ts): a plan change waits for the creates. */
  lockPlan(tx: Em, organizationId: string): Promise<OrganizationPlan>;
  /**
   * The organization's connections as the plan counts them (`vpn_connections`), after queuing on its creates of
   * connections (an advisory lock held to the commit): each create counts what the ones before it committed.
   */
  lockedConnectionCount(tx: Em, deps: AppDeps, organizationId: string): Promise<number>;
  /** The organization's plan as last committed, without a lock (the precheck before claiming an address). */
  readPlan(em: Em, organizationId: string): Promise<OrganizationPlan>;
  /** The organization's connections as the plan counts them, without a lock (the same precheck). */
  connectionCount(em: Em, deps: AppDeps, organizationId: string): Promise<number>;
  createConnection(tx: Em, c: NewConnection): VpnConnection;
  /** Deletes the connection. */
  removeConnection(tx: Em, c: VpnConnection): void;
  /** The organization's `active` and `connecting` connections, locked, oldest first. */
  lockLiveConnectionsOf(tx: Em, organizationId: string): Promise<VpnConnection[]>;
  /** Every peer of the organization leaves its agent server's interface. */
  disablePeersOf(tx: Em, organizationId: string): Promise<void>;
  /** The server's `connecting` and `active` connections, locked, by id. */
  lockLiveConnectionsOnServer(tx: Em, serverId: string): Promise<VpnConnection[]>;
  /** The server's connections that are peers of its agent (but those in `error` with `exceptError`), locked, by id. */
  lockPeersOnServer(tx: Em, serverId: string, opts?: { exceptError?: boolean }): Promise<VpnConnection[]>;
  /** Stores the simulated usage of every active connection as of `now`; how many it stored. */
  storeActiveUsage(now: Date): Promise<number>;

  // ---------- servers ----------
  /** The server `id` (removed ones too); throws when there is none. */
  getServer(em: Em, id: string): Promise<VpnServer>;
  /** The server `id` not removed, its row locked; null when gone. */
  lockServer(tx: Em, id: string): Promise<VpnServer | null>;
  /** The organization's agent server `id` not removed, its row locked; null when there is none. */
  lockAgentServer(tx: Em, organizationId: string, id: string): Promise<VpnServer | null>;
  /** The server `id` if still `online`, not removed and silent since before `cutoff`, its row locked. */
  lockStaleServer(tx: Em, id: string, cutoff: Date): Promise<VpnServer | null>;
  /** Ids of the agent servers `online` that have not reported since `cutoff`. */
  staleAgentServers(em: Em, cutoff: Date): Promise<string[]>;
  /** What the organization sees of the catalogue (vpn-servers.service.ts), by location, city and id. */
  listServers(
    em: Em,
    organizationId: string,
    filter: { location?: VpnLocation | undefined; protocol?: VpnProtocol | undefined },
  ): Promise<VpnServer[]>;
  /** Every server not removed (operator view), by location, city and id. */
  allServers(em: Em): Promise<VpnServer[]>;
  /** The organization's online agent server in `location` for `protocol` with the fewest peers. */
  leastBusyAgentServer(
    em: Em,
    organizationId: string,
    location: VpnLocation,
    protocol: VpnProtocol,
  ): Promise<VpnServer | null>;
  /** The least loaded simulated server in `location` that is online and supports `protocol`. */
  leastLoadedSimulatedServer(em: Em, location: VpnLocation, protocol: VpnProtocol): Promise<VpnServer | null>;
  /** Locations (in order, repeated per server) of the online servers the organization sees for `protocol`. */
  onlineLocations(em: Em, organizationId: string, protocol: VpnProtocol): Promise<VpnLocation[]>;
  /** True when a server not removed already listens at `host:port`. */
  /**
   * True when a server of `organizationId` (null: the shared catalogue) already has `host:port`; other
   * organizations' servers are never looked at.
   */
  addressTaken(tx: Em, host: string, port: number, organizationId: string | null): Promise<boolean>;
  createServer(tx: Em, server: NewServer): VpnServer;
  /** The agent server `Bearer vst_…` stands for, by the token's hash; null when none (or removed). */
  agentServerByTokenHash(em: Em, tokenHash: string): Promise<VpnServer | null>;
  /**
   * Claims the server's next tunnel address in a statement of its own (the row is locked for it only) if it still
   * accepts `protocol`; the new peer index, or null.
   */
  claimPeerIndex(em: Em, serverId: string, protocol: VpnProtocol): Promise<number | null>;
  /**
   * True when the server still accepts `protocol`, under a key-share lock held to the commit of `tx` (its removal
   * waits for the creates under way; creates do not wait for each other).
   */
  holdOpenServer(tx: Em, serverId: string, protocol: VpnProtocol): Promise<boolean>;
  /** Marks an agent server's peer set as changed, in the transaction that changes it. */
  bumpPeers(tx: Em, serverId: string): Promise<void>;
  /** A removed agent server's peers go at its agent's next sync. */
  retireAgentPeers(tx: Em, serverId: string): Promise<void>;
  /** The organization's agent servers stop serving (removed, offline, their peers gone). */
  retireOrganizationServers(tx: Em, organizationId: string, now: Date): Promise<void>;
  /** The peers of the server (`null`: no such server, or removed). */
  peersOf(em: Em, serverId: string): Promise<AgentPeers | null>;

  // ---------- events ----------
  /** Records an organization's webhook event in `tx` (the transactional outbox). */
  recordEvent<P>(tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, now: Date): void;
  /** Records a catalogue event every organization hears of, in `tx`. */
  recordEventForAllOrganizations<P>(tx: Em, event: EventDefinition<P>, payload: P, now: Date): void;
  /** Records a catalogue event one organization hears of, in `tx`. */
  recordPlatformEventFor<P>(
    tx: Em,
    event: EventDefinition<P>,
    payload: P,
    organizationId: string,
    now: Date,
  ): void;
}

// ---------- the MikroORM implementation ----------

/**
 * The connection list is the module's hot read: one prepared round trip for the page and its total, rows mapped straight
 * to the list view (server/db/raw-page.ts). Everything else goes through the ORM.
 */
/** The list's columns, and the filter keys (access/scope.ts: ownedBy, ownedListFilter, inOrganization; the list filters) it takes. */
const LIST: RawPageSpec = {
  table: T.connections,
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
    list: T.connections,
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

/** Servers a connection may use: in the simulated catalogue, `online`, supporting the protocol. */
function availableServerFilter(location: VpnLocation, protocol: VpnProtocol): FilterQuery<VpnServer> {
  return {
    kind: 'simulated',
    location,
    status: 'online',
    deletedAt: null,
    protocols: { $contains: [protocol] },
  };
}

/**
 * What an organization sees of the catalogue: the shared simulated servers and its own registered agent servers
 * (another organization's are never listed nor used).
 */
function visibleServers(organizationId: string) {
  return {
    deletedAt: null,
    $or: [
      { kind: 'simulated' },
      { kind: 'agent', organization: organizationId, registeredAt: { $ne: null } },
    ],
  } satisfies FilterQuery<VpnServer>;
}

export class MikroOrmVpnRepository extends MikroOrmRepository implements VpnRepository {
  async listConnections(
    em: Em,
    filter: ConnectionListFilter,
    page: PageRequest,
  ): Promise<Paged<ConnectionView>> {
    const where: Record<string, unknown> = { organization: filter.organizationId };
    if (filter.userId) where.user = filter.userId;
    if (filter.none) where.id = { $in: [] };
    if (filter.status) where.status = filter.status;
    if (filter.protocol) where.protocol = filter.protocol;
    if (filter.location) where.location = filter.location;
    const found = await findRawPage<ListRow>(em, this.db, LIST, where, page);
    return { total: found.total, hasMore: found.hasMore, items: found.rows.map(toView) };
  }

  findConnection(
    em: Em,
    actor: Actor,
    id: string,
    opts: { lock?: boolean; withServer?: boolean } = {},
  ): Promise<VpnConnection | null> {
    return em.findOne(
      VpnConnection,
      { id, ...ownedBy(actor) },
      {
        ...(opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}),
        ...(opts.withServer ? { populate: ['server'] as never } : {}),
      },
    );
  }

  lockConnection(tx: Em, id: string): Promise<VpnConnection | null> {
    return tx.findOne(VpnConnection, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  }

  lockOwner(tx: Em, userId: string): Promise<void> {
    return lockOwner(tx, userId);
  }

  lockPlan(tx: Em, organizationId: string): Promise<OrganizationPlan> {
    return lockOrganizationPlan(tx, organizationId);
  }

  async lockedConnectionCount(tx: Em, deps: AppDeps, organizationId: string): Promise<number> {
    await lockPlanCounter(tx, organizationId, 'vpn_connections');
    return this.connectionCount(tx, deps, organizationId);
  }

  readPlan(em: Em, organizationId: string): Promise<OrganizationPlan> {
    return readOrganizationPlan(em, organizationId);
  }

  connectionCount(em: Em, deps: AppDeps, organizationId: string): Promise<number> {
    return deps.registry.usage.current(em, organizationId, 'vpn_connections', deps.clock.now());
  }

  createConnection(tx: Em, c: NewConnection): VpnConnection {
    return tx.create(VpnConnection, {
      ...newConnectionFields(c),
      organization: c.organizationId,
      user: tx.getReference(User, c.userId),
      server: tx.getReference(VpnServer, c.serverId),
    });
  }

  removeConnection(tx: Em, c: VpnConnection): void {
    tx.remove(c);
  }

  lockLiveConnectionsOf(tx: Em, organizationId: string): Promise<VpnConnection[]> {
    return tx.find(
      VpnConnection,
      { organization: organizationId, status: { $in: ['active', 'connecting'] } },
      { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { createdAt: 'asc', id: 'asc' } },
    );
  }

  async disablePeersOf(tx: Em, organizationId: string): Promise<void> {
    await tx.nativeUpdate(
      VpnConnection,
      { organization: organizationId, peerEnabled: true },
      { peerEnabled: false },
    );
  }

  lockLiveConnectionsOnServer(tx: Em, serverId: string): Promise<VpnConnection[]> {
    return tx.find(
      VpnConnection,
      { server: serverId, status: { $in: ['connecting', 'active'] } },
      { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { id: 'asc' } },
    );
  }

  lockPeersOnServer(
    tx: Em,
    serverId: string,
    opts: { exceptError?: boolean } = {},
  ): Promise<VpnConnection[]> {
    return tx.find(
      VpnConnection,
      opts.exceptError
        ? { server: serverId, peerEnabled: true, status: { $ne: 'error' } }
        : { server: serverId, peerEnabled: true },
      { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { id: 'asc' } },
    );
  }

  async storeActiveUsage(now: Date): Promise<number> {
    // The formula of vpn.simulation.ts (projectUsage), in SQL.
    const rows = await this.fork().execute<{ id: string }[]>(
      `update ${T.connections} set
        upload_bytes = greatest(upload_bytes,
          session_upload_base + floor(upload_rate * extract(epoch from (?::timestamptz - connected_at)))),
        download_bytes = greatest(download_bytes,
          session_download_base + floor(download_rate * extract(epoch from (?::timestamptz - connected_at)))),
        last_activity = greatest(last_activity, ?::timestamptz)
      where status = 'active' and connected_at is not null and connected_at <= ?
        and (upload_rate > 0 or download_rate > 0)
      returning id`,
      [now, now, now, now],
    );
    return rows.length;
  }

  getServer(em: Em, id: string): Promise<VpnServer> {
    return em.findOneOrFail(VpnServer, id);
  }

  lockServer(tx: Em, id: string): Promise<VpnServer | null> {
    return tx.findOne(VpnServer, { id, deletedAt: null }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  }

  lockAgentServer(tx: Em, organizationId: string, id: string): Promise<VpnServer | null> {
    return tx.findOne(
      VpnServer,
      { id, kind: 'agent', organization: organizationId, deletedAt: null },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
  }

  lockStaleServer(tx: Em, id: string, cutoff: Date): Promise<VpnServer | null> {
    return tx.findOne(
      VpnServer,
      { id, status: 'online', deletedAt: null, lastReportAt: { $lt: cutoff } },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
  }

  async staleAgentServers(em: Em, cutoff: Date): Promise<string[]> {
    const stale = await em.find(
      VpnServer,
      { kind: 'agent', status: 'online', deletedAt: null, lastReportAt: { $lt: cutoff } },
      { fields: ['id'] },
    );
    return stale.map((s) => s.id);
  }

  listServers(
    em: Em,
    organizationId: string,
    filter: { location?: VpnLocation | undefined; protocol?: VpnProtocol | undefined },
  ): Promise<VpnServer[]> {
    return em.find(
      VpnServer,
      {
        ...visibleServers(organizationId),
        ...(filter.location ? { location: filter.location } : {}),
        ...(filter.protocol ? { protocols: { $contains: [filter.protocol] } } : {}),
      },
      { orderBy: { location: 'asc', city: 'asc', id: 'asc' } },
    );
  }

  allServers(em: Em): Promise<VpnServer[]> {
    return em.find(VpnServer, { deletedAt: null }, { orderBy: { location: 'asc', city: 'asc', id: 'asc' } });
  }

  async leastBusyAgentServer(
    em: Em,
    organizationId: string,
    location: VpnLocation,
    protocol: VpnProtocol,
  ): Promise<VpnServer | null> {
    const real = await em.execute<{ id: string }[]>(
      `select s.id from ${T.servers} s
      where s.kind = 'agent' and s.organization_id = ? and s.location = ? and s.status = 'online'
        and s.deleted_at is null and s.registered_at is not null and ? = any(s.protocols)
      order by (select count(*) from ${T.connections} c where c.server_id = s.id and c.peer_enabled), s.id
      limit 1`,
      [organizationId, location, protocol],
    );
    return real[0] ? em.findOneOrFail(VpnServer, real[0].id) : null;
  }

  leastLoadedSimulatedServer(
    em: Em,
    location: VpnLocation,
    protocol: VpnProtocol,
  ): Promise<VpnServer | null> {
    return em.findOne(VpnServer, availableServerFilter(location, protocol), {
      orderBy: { load: 'asc', id: 'asc' },
    });
  }

  async onlineLocations(em: Em, organizationId: string, protocol: VpnProtocol): Promise<VpnLocation[]> {
    const servers = await em.find(
      VpnServer,
      { ...visibleServers(organizationId), status: 'online', protocols: { $contains: [protocol] } },
      { fields: ['location'], orderBy: { location: 'asc' } },
    );
    return servers.map((s) => s.location);
  }

  async addressTaken(tx: Em, host: string, port: number, organizationId: string | null): Promise<boolean> {
    const clash = await tx.count(VpnServer, { host, port, deletedAt: null, organization: organizationId });
    return clash > 0;
  }

  createServer(tx: Em, server: NewServer): VpnServer {
    return tx.create(VpnServer, server);
  }

  agentServerByTokenHash(em: Em, tokenHash: string): Promise<VpnServer | null> {
    return em.findOne(VpnServer, { tokenHash, kind: 'agent', deletedAt: null });
  }

  async claimPeerIndex(em: Em, serverId: string, protocol: VpnProtocol): Promise<number | null> {
    const claimed = await em.execute<{ last_peer_index: number }[]>(
      `update ${T.servers} set last_peer_index = last_peer_index + 1
        where id = ? and deleted_at is null and status = 'online' and ? = any(protocols)
        returning last_peer_index`,
      [serverId, protocol],
    );
    return claimed.length === 0 ? null : Number(claimed[0]!.last_peer_index);
  }

  async holdOpenServer(tx: Em, serverId: string, protocol: VpnProtocol): Promise<boolean> {
    const open = await tx.execute<{ id: string }[]>(
      `select id from ${T.servers}
        where id = ? and deleted_at is null and status = 'online' and ? = any(protocols)
          for key share`,
      [serverId, protocol],
    );
    return open.length > 0;
  }

  async bumpPeers(tx: Em, serverId: string): Promise<void> {
    await tx.execute(
      `update ${T.servers} set peers_version = peers_version + 1 where id = ? and kind = 'agent'`,
      [serverId],
    );
  }

  async retireAgentPeers(tx: Em, serverId: string): Promise<void> {
    await tx.nativeUpdate(VpnConnection, { server: serverId }, { peerEnabled: false });
    await tx.execute(`update ${T.servers} set peers_version = peers_version + 1 where id = ?`, [serverId]);
  }

  async retireOrganizationServers(tx: Em, organizationId: string, now: Date): Promise<void> {
    await tx.execute(
      `update ${T.servers} set deleted_at = ?, status = 'offline', peers_version = peers_version + 1
      where organization_id = ? and deleted_at is null`,
      [now, organizationId],
    );
  }

  async peersOf(em: Em, serverId: string): Promise<AgentPeers | null> {
    const rows = await em.execute<{ version: number; public_key: string | null; address: string | null }[]>(
      `select s.peers_version as version, c.client_public_key as public_key, c.client_address as address
       from ${T.servers} s
       left join ${T.connections} c
         on c.server_id = s.id and c.peer_enabled and c.client_public_key is not null
      where s.id = ? and s.deleted_at is null
      order by c.id`,
      [serverId],
    );
    if (rows.length === 0) return null;
    return {
      version: Number(rows[0]!.version),
      peers: rows
        .filter((r) => r.public_key && r.address)
        .map((r) => ({ public_key: r.public_key!, allowed_ips: [r.address!] })),
    };
  }

  recordEventForAllOrganizations<P>(tx: Em, event: EventDefinition<P>, payload: P, now: Date): void {
    recordEventForAllOrganizations(tx, event, payload, now);
  }

  recordPlatformEventFor<P>(
    tx: Em,
    event: EventDefinition<P>,
    payload: P,
    organizationId: string,
    now: Date,
  ): void {
    recordPlatformEventFor(tx, event, payload, organizationId, now);
  }
}

// ---------- what the manifest and the usage report read (they receive an Em, not the runtime) ----------

/** The module's share of an organization's rows (server/kit/organization-hooks.ts). */
export const VPN_ORGANIZATION_ROWS: OrganizationRows = {
  // The shared simulated catalogue has no organization and stays; the organization's own agent servers go.
  remove: [{ table: T.connections }, { table: T.servers }],
};

/** Connections of an organization, from the list's maintained counts (docs/api-conventions.md, "Lists"), not a count of the rows. */
export function countConnections(em: Em, organizationId: string): Promise<number> {
  return countedRows(em, T.connections, organizationId);
}

/** Every connection of an organization (the usage report, vpn.usage.ts). */
export function connectionsOf(em: Em, organizationId: string): Promise<VpnConnection[]> {
  return em.find(VpnConnection, { organization: organizationId });
}

/** The fields of a new connection but its organization, user and server (references differ by repository). */
export function newConnectionFields(c: NewConnection) {
  return {
    id: c.id,
    createdAt: c.now,
    updatedAt: c.now,
    name: c.name,
    location: c.location,
    protocol: c.protocol,
    status: 'connecting' as const,
    statusMessage: null,
    autoConnect: c.autoConnect,
    connectGeneration: 1,
    clientPublicKey: c.clientPublicKey,
    clientAddress: null,
    connectedAt: null,
    lastActivity: null,
    uploadBytes: 0,
    downloadBytes: 0,
    sessionUploadBase: 0,
    sessionDownloadBase: 0,
    uploadRate: 0,
    downloadRate: 0,
  };
}
