import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { sha256Hex } from '../../lib/crypto.js';
import { conflict, notFound, unauthorized, validation } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import {
  AGENT_POLL_MAX_SECONDS,
  AGENT_REPORT_INTERVAL_SECONDS,
  AGENT_SERVER_ADDRESS,
  CLIENT_NETWORK_CIDR,
} from './vpn.constants.js';
import type { VpnServer } from './vpn-server.entity.js';
import type { AgentPeers } from './vpn.repository.js';
import { toConnectionDetailDto, toServerDto } from './vpn.dto.js';
import { vpnConnected, vpnDisconnected, vpnServerCreated, vpnServerDeleted } from './vpn.events.js';
import type { TCreateServerInput, TCreateServerOutput, TDeleteServerOutput } from './vpn.schema.js';
import { applyPeerReport, markUnreachable, type PeerReport } from './vpn.status.js';
import { transition } from './vpn-connection-state.js';
import { isWireguardKey } from './wireguard.js';

/**
 * Real VPN servers (docs/vpn-servers.md): an organization's owner creates one and receives its server token once;
 * the agent on the host registers with that token, long-polls the peers it must hold, and reports handshakes,
 * byte counters and load. Connections on the server follow those reports (vpn.status.ts).
 */

/** Wakes the long polls of this process when a server's peers change (other processes re-check every few seconds). */
export class PeersHub {
  private waiters = new Map<string, Set<() => void>>();

  wake(serverId: string): void {
    const set = this.waiters.get(serverId);
    if (!set) return;
    this.waiters.delete(serverId);
    for (const w of set) w();
  }

  /** Resolves on a wake for `serverId`, after `ms`, or when `signal` aborts. */
  wait(serverId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiters.get(serverId);
      if (!set) this.waiters.set(serverId, (set = new Set()));
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        set.delete(done);
        if (set.size === 0 && this.waiters.get(serverId) === set) this.waiters.delete(serverId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done);
      set.add(done);
    });
  }
}

/** This process's hub (`deps.modules.vpn`, built by the manifest's `create`). */
export function peersHub(deps: AppDeps): PeersHub {
  return runtimeOf(deps, 'vpn').peers;
}

/** A long poll re-reads the version this often, for changes made by another process. */
const POLL_RECHECK_MS = 5000;

const TOKEN_PREFIX = 'vst_';

// ---------- owner side ----------

export async function createAgentServer(
  ctx: ActorContext,
  input: TCreateServerInput,
): Promise<TCreateServerOutput> {
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const repo = repositoryOf(ctx.deps, 'vpn');
  return repo.transaction(ctx.em, async (tx) => {
    const now = ctx.deps.clock.now();
    // Only the organization's own servers count: another's at this address is neither revealed nor in the way.
    if (await repo.addressTaken(tx, input.host, input.port, ctx.actor.organizationId)) {
      throw conflict(`A server of this organization at ${input.host}:${input.port} already exists`);
    }
    const server = repo.createServer(tx, {
      id: newId('srv'),
      createdAt: now,
      updatedAt: now,
      kind: 'agent',
      organization: ctx.actor.organizationId,
      tokenHash: sha256Hex(token),
      location: input.location,
      city: input.city,
      country: input.country,
      countryCode: input.country_code,
      host: input.host,
      port: input.port,
      openvpnPort: 1194,
      protocols: ['wireguard'],
      // Until the agent registers: not in the catalogue, no key.
      status: 'offline',
      load: 0,
      latency: 0,
      publicKey: '',
      privateKey: '',
      lastPeerIndex: 1,
      registeredAt: null,
      lastReportAt: null,
      peersVersion: 0,
      deletedAt: null,
    });
    return { success: true, server: toServerDto(server), token };
  });
}

export async function deleteAgentServer(ctx: ActorContext, id: string): Promise<TDeleteServerOutput> {
  if (!isId('srv', id)) throw notFound('Server');
  const repo = repositoryOf(ctx.deps, 'vpn');
  await repo.transaction(ctx.em, async (tx) => {
    const now = ctx.deps.clock.now();
    const server = await repo.lockAgentServer(tx, ctx.actor.organizationId, id);
    if (!server) throw notFound('Server');
    server.deletedAt = now;
    server.status = 'offline';
    server.updatedAt = now;
    const connections = await repo.lockPeersOnServer(tx, server.id);
    for (const c of connections) {
      const wasActive = c.status === 'active';
      c.peerEnabled = false;
      transition(c, 'error');
      c.statusMessage = 'The server of this connection was removed';
      c.connectedAt = null;
      c.updatedAt = now;
      if (wasActive)
        repo.recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, server, now), c.organization.id, now);
    }
    if (server.registeredAt) {
      repo.recordPlatformEventFor(tx, vpnServerDeleted, toServerDto(server), ctx.actor.organizationId, now);
    }
  });
  peersHub(ctx.deps).wake(id);
  return { success: true, message: 'VPN server deleted', id };
}

// ---------- agent side ----------

/** The agent server a `Bearer vst_…` token stands for; anything else is 401 (user tokens included). */
export async function authenticateAgent(
  deps: AppDeps,
  authorization: string | undefined,
): Promise<VpnServer> {
  const m = /^Bearer\s+(vst_[A-Za-z0-9_-]{20,100})\s*$/.exec(authorization ?? '');
  if (!m) throw unauthorized('A VPN server token is required');
  const repo = repositoryOf(deps, 'vpn');
  const server = await repo.agentServerByTokenHash(repo.fork(), sha256Hex(m[1]!));
  if (!server) throw unauthorized('Invalid or revoked VPN server token');
  return server;
}

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body ?? {});
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw validation(issue.path.join('.') || 'body', issue.message);
  }
  return r.data;
}

const ZRegister = z.strictObject({
  public_key: z.string().refine(isWireguardKey, 'must be a WireGuard public key (base64 of 32 bytes)'),
  agent_version: z.string().max(50).optional(),
});

export interface AgentRegistration {
  server_id: string;
  listen_port: number;
  address: string;
  network: string;
  report_interval_seconds: number;
  poll_max_seconds: number;
  offline_after_seconds: number;
}

/**
 * Registration: the agent's public key (its private key never leaves the host). The first one adds the server to
 * its organization's catalogue (`vpn.server.created`); later ones (a restart) refresh the key and mark it online.
 */
export async function agentRegister(
  deps: AppDeps,
  serverId: string,
  body: unknown,
): Promise<AgentRegistration> {
  const input = parseBody(ZRegister, body);
  const repo = repositoryOf(deps, 'vpn');
  const server = await repo.transaction(repo.fork(), async (tx) => {
    const now = deps.clock.now();
    const s = await repo.lockServer(tx, serverId);
    if (!s) throw unauthorized('Invalid or revoked VPN server token');
    s.publicKey = input.public_key;
    s.status = 'online';
    s.lastReportAt = now;
    s.updatedAt = now;
    if (!s.registeredAt) {
      s.registeredAt = now;
      repo.recordPlatformEventFor(tx, vpnServerCreated, toServerDto(s), s.organization!.id, now);
    }
    return s;
  });
  return {
    server_id: server.id,
    listen_port: server.port,
    address: AGENT_SERVER_ADDRESS,
    network: CLIENT_NETWORK_CIDR,
    report_interval_seconds: AGENT_REPORT_INTERVAL_SECONDS,
    poll_max_seconds: AGENT_POLL_MAX_SECONDS,
    offline_after_seconds: Math.ceil(deps.config.vpnAgentOfflineMs / 1000),
  };
}

/**
 * The peers the server must hold: only public keys and tunnel addresses. With `since` equal to the current
 * version the answer waits (long poll) until the set changes or `wait` seconds pass.
 */
export async function agentPeers(
  deps: AppDeps,
  serverId: string,
  query: { since?: string | undefined; wait?: string | undefined },
  signal?: AbortSignal,
): Promise<AgentPeers> {
  const since = query.since !== undefined && /^\d{1,10}$/.test(query.since) ? Number(query.since) : undefined;
  const waitRaw = query.wait !== undefined && /^\d{1,3}$/.test(query.wait) ? Number(query.wait) : 0;
  const deadline = Date.now() + Math.min(waitRaw, AGENT_POLL_MAX_SECONDS) * 1000;
  const hub = peersHub(deps);
  const repo = repositoryOf(deps, 'vpn');
  for (;;) {
    const peers = await repo.peersOf(repo.fork(), serverId);
    if (!peers) throw unauthorized('Invalid or revoked VPN server token');
    const left = deadline - Date.now();
    if (since === undefined || peers.version !== since || left <= 0 || signal?.aborted) return peers;
    await hub.wait(serverId, Math.min(left, POLL_RECHECK_MS), signal);
  }
}

const ZReport = z.strictObject({
  load: z.number().int().min(0).max(100).default(0),
  peers: z
    .array(
      z.strictObject({
        public_key: z.string().refine(isWireguardKey, 'must be a WireGuard public key'),
        handshake_age_seconds: z.number().int().min(0).nullable(),
        rx_bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
        tx_bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
      }),
    )
    .max(100_000),
});

/**
 * A report: the server is online; each of ITS peers' handshake and counters update its connection (a key that is
 * not one of this server's peers is ignored). One transaction; `vpn.connected` / `vpn.disconnected` with it.
 */
export async function agentReport(
  deps: AppDeps,
  serverId: string,
  body: unknown,
): Promise<{ success: true; version: number; peers_updated: number }> {
  const input = parseBody(ZReport, body);
  const byKey = new Map<string, PeerReport>();
  for (const p of input.peers) {
    byKey.set(p.public_key, {
      handshakeAgeSeconds: p.handshake_age_seconds,
      rxBytes: p.rx_bytes,
      txBytes: p.tx_bytes,
    });
  }
  const repo = repositoryOf(deps, 'vpn');
  return repo.transaction(repo.fork(), async (tx) => {
    const now = deps.clock.now();
    const server = await repo.lockServer(tx, serverId);
    if (!server) throw unauthorized('Invalid or revoked VPN server token');
    server.lastReportAt = now;
    server.load = input.load;
    if (server.status !== 'online') server.status = 'online';
    const connections = await repo.lockPeersOnServer(tx, server.id);
    let updated = 0;
    for (const c of connections) {
      const peer = c.clientPublicKey ? byKey.get(c.clientPublicKey) : undefined;
      if (peer) updated += 1;
      const before = c.status;
      const event = applyPeerReport(c, peer, now);
      if (c.status !== before) c.updatedAt = now;
      if (event === 'connected') {
        repo.recordEvent(tx, vpnConnected, toConnectionDetailDto(c, server, now), c.organization.id, now);
      } else if (event === 'disconnected') {
        repo.recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, server, now), c.organization.id, now);
      }
    }
    return { success: true as const, version: server.peersVersion, peers_updated: updated };
  });
}

/**
 * Servers whose agent has not reported within `VPN_AGENT_OFFLINE_MS` go `offline`; their connections go to `error`
 * (active ones emit `vpn.disconnected`). Run every few seconds by the module's worker; safe in several processes.
 */
export async function sweepOfflineServers(deps: AppDeps): Promise<number> {
  const repo = repositoryOf(deps, 'vpn');
  const now = deps.clock.now();
  const cutoff = new Date(now.getTime() - deps.config.vpnAgentOfflineMs);
  const stale = await repo.staleAgentServers(repo.fork(), cutoff);
  let n = 0;
  for (const id of stale) {
    await repo.transaction(repo.fork(), async (tx) => {
      const server = await repo.lockStaleServer(tx, id, cutoff);
      if (!server) return;
      n += 1;
      server.status = 'offline';
      server.updatedAt = now;
      const connections = await repo.lockPeersOnServer(tx, id, { exceptError: true });
      for (const c of connections) {
        const event = markUnreachable(c);
        c.updatedAt = now;
        if (event)
          repo.recordEvent(
            tx,
            vpnDisconnected,
            toConnectionDetailDto(c, server, now),
            c.organization.id,
            now,
          );
      }
    });
  }
  return n;
}

/** The module's worker: the offline sweep, a few times per bound. */
export const vpnAgentSweeper = {
  name: 'vpn.agent-sweeper',
  async start(deps: AppDeps) {
    const every = Math.max(250, Math.min(5000, Math.floor(deps.config.vpnAgentOfflineMs / 3)));
    let running: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      running = running
        .then(() => sweepOfflineServers(deps))
        .catch((err: unknown) => deps.log.warn({ err }, 'vpn agent sweep failed'));
    }, every);
    timer.unref();
    return {
      async stop() {
        clearInterval(timer);
        await running;
      },
    };
  },
};
