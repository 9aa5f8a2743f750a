import { repositoryOf } from '../../kit/runtime.js';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import { actsOnWholeOrganization } from '../../access/scope.js';
import type { Em } from '../../db/orm.js';
import { conflict, notFound, validation } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import { assertWithinPlan } from '../../kit/plan-limit.js';
import { vpnDisconnected } from './vpn.events.js';
import { vpnActivateJob, type ActivateJobData } from './vpn.jobs.js';
import type { ConnectionListFilter } from './vpn.repository.js';
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
import { peersHub } from './vpn-agents.service.js';
import { storeUsage } from './vpn.simulation.js';
import { transition } from './vpn-connection-state.js';
import { clientAddress, generateWireguardKeyPair, wgQuickConfig } from './wireguard.js';

const connectionNotFound = () => notFound('VPN connection');

/** A malformed id is not found without a query. */
function checkedId(id: string): string {
  if (!isId('vpn', id)) throw connectionNotFound();
  return id;
}

/**
 * Queues the activation of a connection inside the transaction that made it `connecting`: the job exists exactly
 * when that commits, and the queue then wakes its worker for when it is due (docs/jobs.md, "What the queue layer
 * adds").
 */
async function queueActivation(ctx: ActorContext, tx: Em, data: ActivateJobData): Promise<void> {
  await ctx.deps.jobs.send(vpnActivateJob, data, { em: tx, delayMs: ctx.deps.config.provisioningDelayMs });
}

export async function listConnections(
  ctx: ActorContext,
  input: TListConnectionsInput,
): Promise<TListConnectionsOutput> {
  const { actor } = ctx;
  // The caller's own by default; owners and admins may name a user, or `all` for the whole organization. A member
  // naming anyone but themselves gets an empty list (access/scope.ts, ownedListFilter).
  const whole = actsOnWholeOrganization(actor);
  const wanted = input.user_id ?? actor.userId;
  const owner: Pick<ConnectionListFilter, 'userId' | 'none'> =
    input.user_id === 'all' && whole
      ? {}
      : wanted !== actor.userId && !whole
        ? { userId: actor.userId, none: true }
        : { userId: wanted };
  const filter: ConnectionListFilter = {
    organizationId: actor.organizationId,
    ...owner,
    ...(input.status ? { status: input.status } : {}),
    ...(input.protocol ? { protocol: input.protocol } : {}),
    ...(input.location ? { location: input.location } : {}),
  };

  const request = pageRequest(input);
  const found = await repositoryOf(ctx.deps, 'vpn').listConnections(ctx.em, filter, request);
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
  const c = await repositoryOf(ctx.deps, 'vpn').findConnection(ctx.em, ctx.actor, checkedId(input.id), {
    withServer: true,
  });
  if (!c) throw connectionNotFound();
  return { success: true, connection: toConnectionDetailDto(c, c.server, ctx.deps.clock.now()) };
}

export async function createConnection(
  ctx: ActorContext,
  input: TCreateConnectionInput,
): Promise<TConnectionOutput> {
  const { actor } = ctx;
  const repo = repositoryOf(ctx.deps, 'vpn');
  const server = await pickServerOrThrow(repo, ctx.em, input.location, input.protocol, actor.organizationId);
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
    await assertWithinPlan(await repo.readPlan(ctx.em, actor.organizationId), 'vpn_connections', () =>
      repo.connectionCount(ctx.em, ctx.deps, actor.organizationId),
    );
    const claimed = await repo.claimPeerIndex(ctx.em, server.id, input.protocol);
    if (claimed === null) throw serverGone();
    address = clientAddress(claimed);
  }

  const connection = await repo.transaction(ctx.em, async (tx) => {
    const now = ctx.deps.clock.now();
    await repo.lockOwner(tx, actor.userId);
    await assertWithinPlan(await repo.lockPlan(tx, actor.organizationId), 'vpn_connections', () =>
      repo.lockedConnectionCount(tx, ctx.deps, actor.organizationId),
    );
    const c = repo.createConnection(tx, {
      id,
      now,
      organizationId: actor.organizationId,
      userId: actor.userId,
      serverId: server.id,
      name: input.name,
      location: server.location,
      protocol: input.protocol,
      autoConnect: input.auto_connect ?? false,
      clientPublicKey: keys?.publicKey ?? null,
    });
    // The server still accepts connections, under a key-share lock held to the commit: its removal (which locks the
    // row for update) waits for the creates under way and finds their connections; creates do not wait for each other.
    if (!(await repo.holdOpenServer(tx, server.id, input.protocol))) throw serverGone();
    c.clientAddress = address;
    if (onAgent) await repo.bumpPeers(tx, server.id);
    else await queueActivation(ctx, tx, { connection_id: id, generation: 1 });
    return c;
  });
  // The agent fetches its peers again (the activation job's worker is woken by the queue).
  if (onAgent) peersHub(ctx.deps).wake(server.id);

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
  const repo = repositoryOf(ctx.deps, 'vpn');
  const id = checkedId(input.id);
  const { connection, server, wake } = await repo.transaction(ctx.em, async (tx) => {
    const now = ctx.deps.clock.now();
    const c = await repo.findConnection(tx, actor, id, { lock: true });
    if (!c) throw connectionNotFound();
    const srv = await repo.getServer(tx, c.server.id);
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
        await repo.bumpPeers(tx, srv.id);
        wake = () => peersHub(ctx.deps).wake(srv.id);
      }
      const wasActive = c.status === 'active';
      if (wasActive) storeUsage(c, now);
      transition(c, 'inactive');
      c.statusMessage = null;
      c.connectedAt = null;
      // A pending activation of the previous attempt must not revive it.
      c.connectGeneration += 1;
      if (wasActive) {
        repo.recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, srv, now), c.organization.id, now);
      }
    } else if (input.status === 'active' && (c.status === 'inactive' || c.status === 'error')) {
      changed = true;
      if (srv.deletedAt || srv.status !== 'online' || !srv.protocols.includes(c.protocol)) {
        throw conflict(
          'The server of this connection no longer accepts connections; create a new connection instead',
        );
      }
      transition(c, 'connecting');
      c.statusMessage = null;
      c.connectGeneration += 1;
      if (onAgent) {
        c.peerEnabled = true;
        c.lastHandshakeAt = null;
        await repo.bumpPeers(tx, srv.id);
        wake = () => peersHub(ctx.deps).wake(srv.id);
      } else {
        await queueActivation(ctx, tx, { connection_id: c.id, generation: c.connectGeneration });
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
  const repo = repositoryOf(ctx.deps, 'vpn');
  const id = checkedId(input.id);
  const serverId = await repo.transaction(ctx.em, async (tx) => {
    const now = ctx.deps.clock.now();
    const c = await repo.findConnection(tx, ctx.actor, id, { lock: true });
    if (!c) throw connectionNotFound();
    // A peer of an agent server leaves its interface at the next sync.
    if (c.peerEnabled) await repo.bumpPeers(tx, c.server.id);
    if (c.status === 'active') {
      const srv = await repo.getServer(tx, c.server.id);
      storeUsage(c, now);
      transition(c, 'inactive');
      c.connectedAt = null;
      repo.recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, srv, now), c.organization.id, now);
    }
    repo.removeConnection(tx, c);
    return c.server.id;
  });
  peersHub(ctx.deps).wake(serverId);
  return { success: true, message: 'VPN connection deleted', id: input.id };
}

/**
 * When the organization is deleted (in its transaction): every connection that is active or connecting becomes
 * `inactive` (an activation still queued no longer revives it), each active one with `vpn.disconnected`.
 */
export async function disconnectOrganization(
  tx: Em,
  organization: { id: string },
  now: Date,
  deps: AppDeps,
): Promise<void> {
  const repo = repositoryOf(deps, 'vpn');
  const live = await repo.lockLiveConnectionsOf(tx, organization.id);
  // Its real servers stop serving at once: their tokens no longer authenticate, their peers go.
  await repo.retireOrganizationServers(tx, organization.id, now);
  await repo.disablePeersOf(tx, organization.id);
  for (const c of live) {
    const wasActive = c.status === 'active';
    if (wasActive) storeUsage(c, now);
    transition(c, 'inactive');
    c.statusMessage = null;
    c.connectedAt = null;
    c.connectGeneration += 1;
    c.updatedAt = now;
    if (wasActive) {
      const srv = await repo.getServer(tx, c.server.id);
      repo.recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, srv, now), organization.id, now);
    }
  }
  await repo.flush(tx);
}
