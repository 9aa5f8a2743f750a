import { Organization } from '../../../server/access/organization.entity.js';
import type { Actor } from '../../../server/access/actor.js';
import { actsOnWholeOrganization } from '../../../server/access/scope.js';
import { User } from '../../../server/access/user.entity.js';
import type { Em } from '../../../server/db/orm.js';
import type { Paged } from '../../../server/db/pagination.js';
import type { EventDefinition } from '../../../server/events/define-event.js';
import type { OrganizationPlan } from '../../../server/kit/plan-limit.js';
import type { PageRequest } from '../../../server/lib/pagination.js';
import type { PlanId } from '../../../server/lib/plans.js';
import { VpnConnection } from '../../../server/modules/vpn/vpn-connection.entity.js';
import { VpnServer } from '../../../server/modules/vpn/vpn-server.entity.js';
import type { VpnLocation, VpnProtocol } from '../../../server/modules/vpn/vpn.constants.js';
import type { ConnectionView } from '../../../server/modules/vpn/vpn.dto.js';
import {
  newConnectionFields,
  type AgentPeers,
  type ConnectionListFilter,
  type NewConnection,
  type NewServer,
  type VpnRepository,
} from '../../../server/modules/vpn/vpn.repository.js';
import { byId, NO_EM, newestFirst, reference, row } from '../../support/in-memory.js';

/** Defaults of a server row the create may leave out (the entity's). */
const SERVER_DEFAULTS = {
  kind: 'simulated',
  organization: null,
  tokenHash: null,
  registeredAt: null,
  lastReportAt: null,
  peersVersion: 0,
  openvpnPort: 1194,
  status: 'online',
  load: 0,
  latency: 0,
  lastPeerIndex: 1,
} as const;

/** The list view of a connection row (the columns the MikroORM repository selects). */
function toView(c: VpnConnection): ConnectionView {
  return {
    id: c.id,
    name: c.name,
    status: c.status,
    statusMessage: c.statusMessage,
    location: c.location,
    protocol: c.protocol,
    server: { id: c.server.id },
    user: { id: c.user.id },
    autoConnect: c.autoConnect,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
    connectedAt: c.connectedAt,
    lastActivity: c.lastActivity,
    uploadBytes: c.uploadBytes,
    downloadBytes: c.downloadBytes,
    sessionUploadBase: c.sessionUploadBase,
    sessionDownloadBase: c.sessionDownloadBase,
    uploadRate: c.uploadRate,
    downloadRate: c.downloadRate,
  };
}

/**
 * The VPN repository (server/modules/vpn/vpn.repository.ts) over plain arrays, for unit tests of the services: no
 * database, no server. Rows are plain objects shaped as the entities (references as `{ id }`); a transaction runs its
 * work as it is. Organizations' plans are set with {@link setPlan} (`starter` by default).
 */
export class InMemoryVpnRepository implements VpnRepository {
  readonly servers: VpnServer[] = [];
  readonly connections: VpnConnection[] = [];
  readonly events: { type: string; payload: unknown; organizationId: string | null }[] = [];
  readonly plans = new Map<string, PlanId>();

  setPlan(organizationId: string, plan: PlanId): void {
    this.plans.set(organizationId, plan);
  }

  fork(): Em {
    return NO_EM;
  }

  transaction<R>(_em: Em, work: (tx: Em) => Promise<R>): Promise<R> {
    return work(NO_EM);
  }

  async flush(): Promise<void> {}

  // ---------- connections ----------

  async listConnections(_em: Em, f: ConnectionListFilter, q: PageRequest): Promise<Paged<ConnectionView>> {
    const rows = this.connections
      .filter(
        (c) =>
          !f.none &&
          c.organization.id === f.organizationId &&
          (!f.userId || c.user.id === f.userId) &&
          (!f.status || c.status === f.status) &&
          (!f.protocol || c.protocol === f.protocol) &&
          (!f.location || c.location === f.location),
      )
      .sort(newestFirst);
    let start = (q.page - 1) * q.limit;
    if (q.startingAfter) start = rows.findIndex((r) => r.id === q.startingAfter) + 1;
    return {
      items: rows.slice(start, start + q.limit).map(toView),
      total: rows.length,
      hasMore: start + q.limit < rows.length,
    };
  }

  async findConnection(
    _em: Em,
    actor: Actor,
    id: string,
    opts: { withServer?: boolean } = {},
  ): Promise<VpnConnection | null> {
    const c = this.connections.find(
      (x) =>
        x.id === id &&
        x.organization.id === actor.organizationId &&
        (actsOnWholeOrganization(actor) || x.user.id === actor.userId),
    );
    if (!c) return null;
    if (opts.withServer) c.server = await this.getServer(NO_EM, c.server.id);
    return c;
  }

  async lockConnection(_tx: Em, id: string): Promise<VpnConnection | null> {
    return this.connections.find((c) => c.id === id) ?? null;
  }

  async lockOwner(): Promise<void> {}

  async lockPlan(_tx: Em, organizationId: string): Promise<OrganizationPlan> {
    return this.readPlan(NO_EM, organizationId);
  }

  async lockedConnectionCount(_tx: Em, _deps: unknown, organizationId: string): Promise<number> {
    return this.connectionCount(NO_EM, _deps, organizationId);
  }

  async readPlan(_em: Em, organizationId: string): Promise<OrganizationPlan> {
    return { plan: this.plans.get(organizationId) ?? 'starter', status: 'active' };
  }

  async connectionCount(_em: Em, _deps: unknown, organizationId: string): Promise<number> {
    return this.connections.filter((c) => c.organization.id === organizationId).length;
  }

  createConnection(_tx: Em, n: NewConnection): VpnConnection {
    const c = row(VpnConnection, {
      ...newConnectionFields(n),
      organization: reference(Organization, n.organizationId),
      user: reference(User, n.userId),
      server: reference(VpnServer, n.serverId),
      peerEnabled: true,
      lastHandshakeAt: null,
      reportedRx: 0,
      reportedTx: 0,
    });
    this.connections.push(c);
    return c;
  }

  removeConnection(_tx: Em, c: VpnConnection): void {
    this.connections.splice(this.connections.indexOf(c), 1);
  }

  async lockLiveConnectionsOf(_tx: Em, organizationId: string): Promise<VpnConnection[]> {
    return this.connections
      .filter((c) => c.organization.id === organizationId && ['active', 'connecting'].includes(c.status))
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || byId(a, b));
  }

  async disablePeersOf(_tx: Em, organizationId: string): Promise<void> {
    for (const c of this.connections) if (c.organization.id === organizationId) c.peerEnabled = false;
  }

  async lockLiveConnectionsOnServer(_tx: Em, serverId: string): Promise<VpnConnection[]> {
    return this.connections
      .filter((c) => c.server.id === serverId && ['connecting', 'active'].includes(c.status))
      .sort(byId);
  }

  async lockPeersOnServer(
    _tx: Em,
    serverId: string,
    opts: { exceptError?: boolean } = {},
  ): Promise<VpnConnection[]> {
    return this.connections
      .filter((c) => c.server.id === serverId && c.peerEnabled && !(opts.exceptError && c.status === 'error'))
      .sort(byId);
  }

  storeActiveUsage(): Promise<number> {
    return Promise.reject(new Error('not kept in memory: the usage sampling is SQL (vpn.repository.ts)'));
  }

  // ---------- servers ----------

  private serverById(id: string): VpnServer | undefined {
    return this.servers.find((s) => s.id === id);
  }

  async getServer(_em: Em, id: string): Promise<VpnServer> {
    const s = this.serverById(id);
    if (!s) throw new Error(`VpnServer not found ('${id}')`);
    return s;
  }

  async lockServer(_tx: Em, id: string): Promise<VpnServer | null> {
    return this.servers.find((s) => s.id === id && !s.deletedAt) ?? null;
  }

  async lockAgentServer(_tx: Em, organizationId: string, id: string): Promise<VpnServer | null> {
    return (
      this.servers.find(
        (s) => s.id === id && s.kind === 'agent' && s.organization?.id === organizationId && !s.deletedAt,
      ) ?? null
    );
  }

  private stale(s: VpnServer, cutoff: Date): boolean {
    return s.status === 'online' && !s.deletedAt && !!s.lastReportAt && s.lastReportAt < cutoff;
  }

  async lockStaleServer(_tx: Em, id: string, cutoff: Date): Promise<VpnServer | null> {
    return this.servers.find((s) => s.id === id && this.stale(s, cutoff)) ?? null;
  }

  async staleAgentServers(_em: Em, cutoff: Date): Promise<string[]> {
    return this.servers.filter((s) => s.kind === 'agent' && this.stale(s, cutoff)).map((s) => s.id);
  }

  private visible(s: VpnServer, organizationId: string): boolean {
    return (
      !s.deletedAt &&
      (s.kind === 'simulated' || (s.organization?.id === organizationId && s.registeredAt !== null))
    );
  }

  private byPlace = (a: VpnServer, b: VpnServer) =>
    a.location.localeCompare(b.location) || a.city.localeCompare(b.city) || byId(a, b);

  async listServers(
    _em: Em,
    organizationId: string,
    f: { location?: VpnLocation | undefined; protocol?: VpnProtocol | undefined },
  ): Promise<VpnServer[]> {
    return this.servers
      .filter(
        (s) =>
          this.visible(s, organizationId) &&
          (!f.location || s.location === f.location) &&
          (!f.protocol || s.protocols.includes(f.protocol)),
      )
      .sort(this.byPlace);
  }

  async allServers(): Promise<VpnServer[]> {
    return this.servers.filter((s) => !s.deletedAt).sort(this.byPlace);
  }

  async leastBusyAgentServer(
    _em: Em,
    organizationId: string,
    location: VpnLocation,
    protocol: VpnProtocol,
  ): Promise<VpnServer | null> {
    const peers = (s: VpnServer) =>
      this.connections.filter((c) => c.server.id === s.id && c.peerEnabled).length;
    const [first] = this.servers
      .filter(
        (s) =>
          s.kind === 'agent' &&
          s.organization?.id === organizationId &&
          s.location === location &&
          s.status === 'online' &&
          !s.deletedAt &&
          s.registeredAt !== null &&
          s.protocols.includes(protocol),
      )
      .sort((a, b) => peers(a) - peers(b) || byId(a, b));
    return first ?? null;
  }

  async leastLoadedSimulatedServer(
    _em: Em,
    location: VpnLocation,
    protocol: VpnProtocol,
  ): Promise<VpnServer | null> {
    const [first] = this.servers
      .filter(
        (s) =>
          s.kind === 'simulated' &&
          s.location === location &&
          s.status === 'online' &&
          !s.deletedAt &&
          s.protocols.includes(protocol),
      )
      .sort((a, b) => a.load - b.load || byId(a, b));
    return first ?? null;
  }

  async onlineLocations(_em: Em, organizationId: string, protocol: VpnProtocol): Promise<VpnLocation[]> {
    return this.servers
      .filter(
        (s) => this.visible(s, organizationId) && s.status === 'online' && s.protocols.includes(protocol),
      )
      .map((s) => s.location)
      .sort();
  }

  async addressTaken(_tx: Em, host: string, port: number, organizationId: string | null): Promise<boolean> {
    return this.servers.some(
      (s) =>
        s.host === host && s.port === port && !s.deletedAt && (s.organization?.id ?? null) === organizationId,
    );
  }

  createServer(_tx: Em, data: NewServer): VpnServer {
    const { organization, ...rest } = data;
    // The services name the organization by id (a shared server has none).
    const organizationId =
      typeof organization === 'string'
        ? organization
        : organization instanceof Organization
          ? organization.id
          : null;
    const s = Object.assign(new VpnServer(), SERVER_DEFAULTS, rest, {
      organization: organizationId ? reference(Organization, organizationId) : null,
    });
    this.servers.push(s);
    return s;
  }

  async agentServerByTokenHash(_em: Em, tokenHash: string): Promise<VpnServer | null> {
    return this.servers.find((s) => s.tokenHash === tokenHash && s.kind === 'agent' && !s.deletedAt) ?? null;
  }

  private accepts(s: VpnServer | undefined, protocol: VpnProtocol): s is VpnServer {
    return !!s && !s.deletedAt && s.status === 'online' && s.protocols.includes(protocol);
  }

  async claimPeerIndex(_em: Em, serverId: string, protocol: VpnProtocol): Promise<number | null> {
    const s = this.serverById(serverId);
    if (!this.accepts(s, protocol)) return null;
    s.lastPeerIndex += 1;
    return s.lastPeerIndex;
  }

  async holdOpenServer(_tx: Em, serverId: string, protocol: VpnProtocol): Promise<boolean> {
    return this.accepts(this.serverById(serverId), protocol);
  }

  async bumpPeers(_tx: Em, serverId: string): Promise<void> {
    const s = this.serverById(serverId);
    if (s?.kind === 'agent') s.peersVersion += 1;
  }

  async retireAgentPeers(_tx: Em, serverId: string): Promise<void> {
    for (const c of this.connections) if (c.server.id === serverId) c.peerEnabled = false;
    const s = this.serverById(serverId);
    if (s) s.peersVersion += 1;
  }

  async retireOrganizationServers(_tx: Em, organizationId: string, now: Date): Promise<void> {
    for (const s of this.servers) {
      if (s.organization?.id !== organizationId || s.deletedAt) continue;
      s.deletedAt = now;
      s.status = 'offline';
      s.peersVersion += 1;
    }
  }

  async peersOf(_em: Em, serverId: string): Promise<AgentPeers | null> {
    const s = this.serverById(serverId);
    if (!s || s.deletedAt) return null;
    return {
      version: s.peersVersion,
      peers: this.connections
        .filter((c) => c.server.id === serverId && c.peerEnabled && c.clientPublicKey && c.clientAddress)
        .sort(byId)
        .map((c) => ({ public_key: c.clientPublicKey!, allowed_ips: [c.clientAddress!] })),
    };
  }

  // ---------- events ----------

  recordEvent<P>(_tx: Em, event: EventDefinition<P>, payload: P, organizationId: string): void {
    this.events.push({ type: event.type, payload, organizationId });
  }

  recordEventForAllOrganizations<P>(_tx: Em, event: EventDefinition<P>, payload: P): void {
    this.events.push({ type: event.type, payload, organizationId: null });
  }

  recordPlatformEventFor<P>(_tx: Em, event: EventDefinition<P>, payload: P, organizationId: string): void {
    this.events.push({ type: event.type, payload, organizationId });
  }
}
