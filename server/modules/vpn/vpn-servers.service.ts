import { repositoryOf } from '../../kit/runtime.js';
import { z } from 'zod';
import type { Em } from '../../db/orm.js';
import { conflict, notFound, validation } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import type { ActorContext } from '../../kit/deps.js';
import {
  DEFAULT_OPENVPN_PORT,
  DEFAULT_WIREGUARD_PORT,
  SERVER_STATUSES,
  VPN_LOCATIONS,
  VPN_PROTOCOLS,
  type VpnLocation,
  type VpnProtocol,
} from './vpn.constants.js';
import type { VpnServer } from './vpn-server.entity.js';
import type { VpnRepository } from './vpn.repository.js';
import { toConnectionDetailDto, toServerDto } from './vpn.dto.js';
import type { TListServersInput, TListServersOutput, TServer } from './vpn.schema.js';
import { storeUsage } from './vpn.simulation.js';
import { transition } from './vpn-connection-state.js';
import { vpnDisconnected, vpnServerCreated, vpnServerDeleted } from './vpn.events.js';
import { generateWireguardKeyPair } from './wireguard.js';

export async function listServers(ctx: ActorContext, input: TListServersInput): Promise<TListServersOutput> {
  // The shared simulated servers and the organization's own registered agent servers (another organization's are
  // never listed nor used).
  const servers = await repositoryOf(ctx.deps, 'vpn').listServers(ctx.em, ctx.actor.organizationId, {
    location: input.location,
    protocol: input.protocol,
  });
  return { success: true, servers: servers.map(toServerDto), total: servers.length };
}

/**
 * Where a new connection goes (docs/vpn-servers.md, "Placement"): the organization's online agent server in that
 * location with the fewest peers, else the least loaded simulated server; or a 400 that says what is available.
 */
export async function pickServerOrThrow(
  repo: VpnRepository,
  em: Em,
  location: VpnLocation,
  protocol: VpnProtocol,
  organizationId: string,
): Promise<VpnServer> {
  const real = await repo.leastBusyAgentServer(em, organizationId, location, protocol);
  if (real) return real;
  const server = await repo.leastLoadedSimulatedServer(em, location, protocol);
  if (server) return server;
  const locations = [...new Set(await repo.onlineLocations(em, organizationId, protocol))];
  const message =
    `No online server in ${location} supports ${protocol}` +
    (locations.length ? `; ${protocol} is available in: ${locations.join(', ')}` : '');
  throw validation('location', message);
}

const hostname =
  /^(?=.{1,253}$)([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const ipv4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

export const ZAddServerInput = z.strictObject({
  location: z.enum(VPN_LOCATIONS),
  city: z.string().trim().min(1).max(100),
  country: z.string().trim().min(1).max(100),
  country_code: z
    .string()
    .trim()
    .regex(/^[A-Za-z]{2}$/, 'must be a two-letter country code')
    .transform((s) => s.toUpperCase()),
  protocols: z
    .array(z.enum(VPN_PROTOCOLS))
    .min(1, 'at least one protocol')
    .transform((a) => [...new Set(a)]),
  host: z
    .string()
    .trim()
    .toLowerCase()
    .refine((h) => ipv4.test(h) || hostname.test(h), 'must be a host name or IPv4 address'),
  port: z.number().int().min(1).max(65535).default(DEFAULT_WIREGUARD_PORT),
  openvpn_port: z.number().int().min(1).max(65535).default(DEFAULT_OPENVPN_PORT),
  status: z.enum(SERVER_STATUSES).default('online'),
  load: z.number().int().min(0).max(100).default(0),
  latency: z.number().int().min(0).max(10_000).default(0),
});
export type TAddServerInput = z.input<typeof ZAddServerInput>;

/** Adds a server with a fresh key pair and tells every organization (`vpn.server.created`), in one transaction. */
export async function addServer(
  repo: VpnRepository,
  em: Em,
  raw: TAddServerInput,
  now: Date,
): Promise<{ server: TServer }> {
  const input = ZAddServerInput.parse(raw);
  const keys = generateWireguardKeyPair();
  return repo.transaction(em, async (tx) => {
    if (await repo.addressTaken(tx, input.host, input.port, null)) {
      throw conflict(`A server at ${input.host}:${input.port} already exists`);
    }
    const server = repo.createServer(tx, {
      id: newId('srv'),
      createdAt: now,
      updatedAt: now,
      location: input.location,
      city: input.city,
      country: input.country,
      countryCode: input.country_code,
      host: input.host,
      port: input.port,
      openvpnPort: input.openvpn_port,
      protocols: input.protocols,
      status: input.status,
      load: input.load,
      latency: input.latency,
      publicKey: keys.publicKey,
      privateKey: keys.privateKey,
      lastPeerIndex: 1,
      deletedAt: null,
    });
    const dto = toServerDto(server);
    // One event for the whole platform: the relay hands it to every organization's subscribed webhooks.
    repo.recordEventForAllOrganizations(tx, vpnServerCreated, dto, now);
    return { server: dto };
  });
}

/**
 * Removes a server from the catalogue. Its connections that were `connecting` or `active` go to `error` (active
 * ones emit `vpn.disconnected`); every organization gets `vpn.server.deleted`. One transaction.
 */
export async function removeServer(
  repo: VpnRepository,
  em: Em,
  id: string,
  now: Date,
): Promise<{ server: TServer; connectionsAffected: number }> {
  if (!isId('srv', id)) throw notFound(`Server ${id}`);
  return repo.transaction(em, async (tx) => {
    const server = await repo.lockServer(tx, id);
    if (!server) throw notFound(`Server ${id}`);
    server.deletedAt = now;
    const connections = await repo.lockLiveConnectionsOnServer(tx, server.id);
    for (const c of connections) {
      const wasActive = c.status === 'active';
      if (wasActive) storeUsage(c, now);
      transition(c, 'error');
      c.statusMessage = 'The server of this connection was removed from the catalogue';
      c.connectedAt = null;
      c.connectGeneration += 1;
      if (wasActive) {
        const object = toConnectionDetailDto(c, server, now);
        repo.recordEvent(tx, vpnDisconnected, object, c.organization.id, now);
      }
    }
    if (server.kind === 'agent') {
      // Its agent's peers go at the next sync; the token no longer authenticates.
      await repo.retireAgentPeers(tx, server.id);
    }
    const dto = toServerDto(server);
    // An agent server serves its own organization only: no other organization hears of it.
    if (server.kind === 'agent' && server.organization) {
      if (server.registeredAt) {
        repo.recordPlatformEventFor(tx, vpnServerDeleted, dto, server.organization.id, now);
      }
    } else {
      repo.recordEventForAllOrganizations(tx, vpnServerDeleted, dto, now);
    }
    return { server: dto, connectionsAffected: connections.length };
  });
}

/** Every server of the catalogue (operator view). */
export async function allServers(repo: VpnRepository, em: Em): Promise<TServer[]> {
  const servers = await repo.allServers(em);
  return servers.map(toServerDto);
}
