import { LockMode, type FilterQuery } from '@mikro-orm/core';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import type { Actor } from '../../access/actor.js';
import { lockOwner } from '../../access/owned-resources.js';
import { actsOnWholeOrganization, inOrganization, ownedBy, ownedListFilter } from '../../access/scope.js';
import { User } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import { recordEvent } from '../../events/record-event.js';
import { conflict, notFound, validation } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import type { ActorContext } from '../../kit/deps.js';
import { assertWithinPlan, precheckPlan } from '../../kit/plan-limit.js';
import { vpnDisconnected } from './vpn.events.js';
import { vpnActivateJob, type ActivateJobData } from './vpn.jobs.js';
import { VpnConnection } from './vpn-connection.entity.js';
import { VpnServer } from './vpn-server.entity.js';
import { serverEndpoint, toConnectionDetailDto, toConnectionDto } from './vpn.dto.js';
import type {
  TConnectionIdInput,
  TConnectionOutput,
  TCreateConnectionInput,
  TDeleteConnectionOutput,
  TListConnectionsInput,
  TListConnectionsOutput,
  TUpdateConnectionInput,
} from './vpn.schema.js';
import { pickServerOrThrow } from './vpn-servers.service.js';
import { bumpPeers, peersHub } from './vpn-agents.service.js';
import { findConnectionPage } from './vpn.queries.js';
import { storeUsage } from './vpn.simulation.js';
import { clientAddress, generateWireguardKeyPair, wgQuickConfig } from './wireguard.js';

const connectionNotFound = () => notFound('VPN connection');

/** The caller's view of one connection: another tenant's or (for members) another user's is not found. */
function scopedFilter(actor: Actor, id: string): FilterQuery<VpnConnection> {
  if (!isId('vpn', id)) throw connectionNotFound();
  return { id, ...ownedBy(actor) };
}

/**
 * Queues the activation of a connection inside the transaction that made it `connecting` (so the job exists
 * exactly when that commits), and wakes the worker when it is due instead of waiting for its next poll.
 */
async function queueActivation(ctx: ActorContext, tx: Em, data: ActivateJobData): Promise<() => void> {
  const delayMs = ctx.deps.config.provisioningDelayMs;
  await ctx.deps.jobs.send(vpnActivateJob, data, { em: tx, delayMs });
  return () => {
    setTimeout(() => ctx.deps.jobs.notify(vpnActivateJob.name), delayMs + 25).unref();
  };
}

export async function listConnections(
  ctx: ActorContext,
  input: TListConnectionsInput,
): Promise<TListConnectionsOutput> {
  const { actor } = ctx;
  // The caller's own by default; owners and admins may name a user, or `all` for the whole organization.
  const where: Record<string, unknown> =
    input.user_id === 'all' && actsOnWholeOrganization(actor)
      ? inOrganization(actor)
      : ownedListFilter(actor, { userId: input.user_id });
  if (input.status) where.status = input.status;
  if (input.protocol) where.protocol = input.protocol;
  if (input.location) where.location = input.location;

  const request = pageRequest(input);
  const found = await findConnectionPage(ctx.em, ctx.deps.db, where, request);
  const now = ctx.deps.clock.now();
  return {
    success: true,
    connections: found.items.map((c) => toConnectionDto(c, now)),
    ...pageFields(request, found),
  };
}

export async function getConnection(
  ctx: ActorContext,
  input: TConnectionIdInput,
): Promise<TConnectionOutput> {
  const c = await ctx.em.findOne(VpnConnection, scopedFilter(ctx.actor, input.id), { populate: ['server'] });
  if (!c) throw connectionNotFound();
  return { success: true, connection: toConnectionDetailDto(c, c.server, ctx.deps.clock.now()) };
}

export async function createConnection(
  ctx: ActorContext,
  input: TCreateConnectionInput,
): Promise<TConnectionOutput> {
  const { actor } = ctx;
  const server = await pickServerOrThrow(ctx.em, input.location, input.protocol, actor.organizationId);
  // On an agent server the status follows the agent's reports (vpn.status.ts); no simulated activation.
  const onAgent = server.kind === 'agent';
  // The private half leaves this function only inside the create response; it is never stored.
  const keys = input.protocol === 'wireguard' ? generateWireguardKeyPair() : null;
  const id = newId('vpn');

  const serverGone = () =>
    validation('location', `The server in ${input.location} stopped accepting connections; try again`);
  // Claims the server's next tunnel address in a statement of its own, before the transaction: the server's row is
  // locked for that statement only, not until the create commits (every create on the server would queue on it). An
  // address claimed by a create that fails afterwards is not used again (4 million per server); an organization at
  // its plan's limit is refused before any is claimed.
  let address: string | null = null;
  if (keys) {
    await precheckPlan(ctx.em, ctx.deps, actor.organizationId, 'vpn_connections');
    const claimed = await ctx.em.execute<{ last_peer_index: number }[]>(
      `update vpn_servers set last_peer_index = last_peer_index + 1
        where id = ? and deleted_at is null and status = 'online' and ? = any(protocols)
        returning last_peer_index`,
      [server.id, input.protocol],
    );
    if (claimed.length === 0) throw serverGone();
    address = clientAddress(Number(claimed[0]!.last_peer_index));
  }

  const { connection, wake } = await ctx.em.transactional(async (tx) => {
    const now = ctx.deps.clock.now();
    await lockOwner(tx, actor.userId);
    await assertWithinPlan(tx, ctx.deps, actor.organizationId, 'vpn_connections');
    const c = tx.create(VpnConnection, {
      id,
      createdAt: now,
      updatedAt: now,
      organization: actor.organizationId,
      user: tx.getReference(User, actor.userId),
      server: tx.getReference(VpnServer, server.id),
      name: input.name,
      location: server.location,
      protocol: input.protocol,
      status: 'connecting',
      statusMessage: null,
      autoConnect: input.auto_connect ?? false,
      connectGeneration: 1,
      clientPublicKey: keys?.publicKey ?? null,
      clientAddress: null,
      connectedAt: null,
      lastActivity: null,
      uploadBytes: 0,
      downloadBytes: 0,
      sessionUploadBase: 0,
      sessionDownloadBase: 0,
      uploadRate: 0,
      downloadRate: 0,
    });
    // The server still accepts connections, under a key-share lock held to the commit: its removal (which locks the
    // row for update) waits for the creates under way and finds their connections; creates do not wait for each other.
    const open = await tx.execute<{ id: string }[]>(
      `select id from vpn_servers
        where id = ? and deleted_at is null and status = 'online' and ? = any(protocols)
          for key share`,
      [server.id, input.protocol],
    );
    if (open.length === 0) throw serverGone();
    c.clientAddress = address;
    if (onAgent) await bumpPeers(tx, server.id);
    const wake = onAgent
      ? () => peersHub(ctx.deps).wake(server.id)
      : await queueActivation(ctx, tx, { connection_id: id, generation: 1 });
    return { connection: c, wake };
  });
  wake();

  const wgQuick =
    keys && connection.clientAddress
      ? wgQuickConfig({
          name: connection.name,
          clientPrivateKey: keys.privateKey,
          address: connection.clientAddress,
          serverPublicKey: server.publicKey,
          endpoint: serverEndpoint(server, 'wireguard'),
        })
      : null;
  return {
    success: true,
    connection: toConnectionDetailDto(connection, server, ctx.deps.clock.now(), wgQuick),
  };
}

export async function updateConnection(
  ctx: ActorContext,
  input: TUpdateConnectionInput,
): Promise<TConnectionOutput> {
  const { actor } = ctx;
  const filter = scopedFilter(actor, input.id);
  const { connection, server, wake } = await ctx.em.transactional(async (tx) => {
    const now = ctx.deps.clock.now();
    const c = await tx.findOne(VpnConnection, filter, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!c) throw connectionNotFound();
    const srv = await tx.findOneOrFail(VpnServer, c.server.id);
    let wake: (() => void) | undefined;
    let changed = false;
    if (input.name !== undefined && input.name !== c.name) {
      c.name = input.name;
      changed = true;
    }
    if (input.auto_connect !== undefined && input.auto_connect !== c.autoConnect) {
      c.autoConnect = input.auto_connect;
      changed = true;
    }
    const onAgent = srv.kind === 'agent';
    if (input.status === 'inactive' && (c.status !== 'inactive' || (onAgent && c.peerEnabled))) {
      changed = true;
      if (onAgent && c.peerEnabled) {
        // The agent drops the peer at its next sync.
        c.peerEnabled = false;
        c.lastHandshakeAt = null;
        await bumpPeers(tx, srv.id);
        wake = () => peersHub(ctx.deps).wake(srv.id);
      }
      const wasActive = c.status === 'active';
      if (wasActive) storeUsage(c, now);
      c.status = 'inactive';
      c.statusMessage = null;
      c.connectedAt = null;
      // A pending activation of the previous attempt must not revive it.
      c.connectGeneration += 1;
      if (wasActive) {
        recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, srv, now), c.organization.id, now);
      }
    } else if (input.status === 'active' && (c.status === 'inactive' || c.status === 'error')) {
      changed = true;
      if (srv.deletedAt || srv.status !== 'online' || !srv.protocols.includes(c.protocol)) {
        throw conflict(
          'The server of this connection no longer accepts connections; create a new connection instead',
        );
      }
      c.status = 'connecting';
      c.statusMessage = null;
      c.connectGeneration += 1;
      if (onAgent) {
        c.peerEnabled = true;
        c.lastHandshakeAt = null;
        await bumpPeers(tx, srv.id);
        wake = () => peersHub(ctx.deps).wake(srv.id);
      } else {
        wake = await queueActivation(ctx, tx, { connection_id: c.id, generation: c.connectGeneration });
      }
    }
    if (changed) c.updatedAt = now;
    return { connection: c, server: srv, wake };
  });
  wake?.();
  return {
    success: true,
    connection: toConnectionDetailDto(connection, server, ctx.deps.clock.now()),
  };
}

export async function deleteConnection(
  ctx: ActorContext,
  input: TConnectionIdInput,
): Promise<TDeleteConnectionOutput> {
  const filter = scopedFilter(ctx.actor, input.id);
  const serverId = await ctx.em.transactional(async (tx) => {
    const now = ctx.deps.clock.now();
    const c = await tx.findOne(VpnConnection, filter, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!c) throw connectionNotFound();
    // A peer of an agent server leaves its interface at the next sync.
    if (c.peerEnabled) await bumpPeers(tx, c.server.id);
    if (c.status === 'active') {
      const srv = await tx.findOneOrFail(VpnServer, c.server.id);
      storeUsage(c, now);
      c.status = 'inactive';
      c.connectedAt = null;
      recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, srv, now), c.organization.id, now);
    }
    tx.remove(c);
    return c.server.id;
  });
  peersHub(ctx.deps).wake(serverId);
  return { success: true, message: 'VPN connection deleted', id: input.id };
}

/**
 * When the organization is deleted (in its transaction): every connection that is active or connecting becomes
 * `inactive` (an activation still queued no longer revives it), each active one with `vpn.disconnected`.
 */
export async function disconnectOrganization(tx: Em, organization: { id: string }, now: Date): Promise<void> {
  const live = await tx.find(
    VpnConnection,
    { organization: organization.id, status: { $in: ['active', 'connecting'] } },
    { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { createdAt: 'asc', id: 'asc' } },
  );
  // Its real servers stop serving at once: their tokens no longer authenticate, their peers go.
  await tx.execute(
    `update vpn_servers set deleted_at = ?, status = 'offline', peers_version = peers_version + 1
      where organization_id = ? and deleted_at is null`,
    [now, organization.id],
  );
  await tx.nativeUpdate(
    VpnConnection,
    { organization: organization.id, peerEnabled: true },
    { peerEnabled: false },
  );
  for (const c of live) {
    const wasActive = c.status === 'active';
    if (wasActive) storeUsage(c, now);
    c.status = 'inactive';
    c.statusMessage = null;
    c.connectedAt = null;
    c.connectGeneration += 1;
    c.updatedAt = now;
    if (wasActive) {
      const srv = await tx.findOneOrFail(VpnServer, c.server.id);
      recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, srv, now), organization.id, now);
    }
  }
  await tx.flush();
}
