import { randomBytes } from 'node:crypto';
import { LockMode } from '@mikro-orm/core';
import { z } from 'zod';
import type { Em } from '../../db/orm.js';
import { recordEvent, recordPlatformEventFor } from '../../events/record-event.js';
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
import { VpnConnection } from './vpn-connection.entity.js';
import { VpnServer } from './vpn-server.entity.js';
import { toConnectionDetailDto, toServerDto } from './vpn.dto.js';
import { vpnConnected, vpnDisconnected, vpnServerCreated, vpnServerDeleted } from './vpn.events.js';
import type { TCreateServerInput, TCreateServerOutput, TDeleteServerOutput } from './vpn.schema.js';
import { applyPeerReport, markUnreachable, type PeerReport } from './vpn.status.js';
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
  return deps.modules.vpn.peers;
}

/** A long poll re-reads the version this often, for changes made by another process. */
const POLL_RECHECK_MS = 5000;

/** Marks a server's peer set as changed, in the transaction that changes it (wake its poll after commit). */
export async function bumpPeers(tx: Em, serverId: string): Promise<void> {
  await tx.execute(
    `update vpn_servers set peers_version = peers_version + 1 where id = ? and kind = 'agent'`,
    [serverId],
  );
}

const TOKEN_PREFIX = 'vst_';

// ---------- owner side ----------

export async function createAgentServer(
  ctx: ActorContext,
  input: TCreateServerInput,
): Promise<TCreateServerOutput> {
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  return ctx.em.transactional(async (tx) => {
    const now = ctx.deps.clock.now();
    const clash = await tx.count(VpnServer, { host: input.host, port: input.port, deletedAt: null });
    if (clash > 0) throw conflict(`A server at ${input.host}:${input.port} already exists`);
    const server = tx.create(VpnServer, {
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
  await ctx.em.transactional(async (tx) => {
    const now = ctx.deps.clock.now();
    const server = await tx.findOne(
      VpnServer,
      { id, kind: 'agent', organization: ctx.actor.organizationId, deletedAt: null },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    if (!server) throw notFound('Server');
    server.deletedAt = now;
    server.status = 'offline';
    server.updatedAt = now;
    const connections = await tx.find(
      VpnConnection,
      { server: server.id, peerEnabled: true },
      { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { id: 'asc' } },
    );
    for (const c of connections) {
      const wasActive = c.status === 'active';
      c.peerEnabled = false;
      c.status = 'error';
      c.statusMessage = 'The server of this connection was removed';
      c.connectedAt = null;
      c.updatedAt = now;
      if (wasActive)
        recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, server, now), c.organization.id, now);
    }
    if (server.registeredAt) {
      recordPlatformEventFor(tx, vpnServerDeleted, toServerDto(server), ctx.actor.organizationId, now);
    }
  });
  peersHub(ctx.deps).wake(id);
  return { success: true, message: 'VPN server deleted', id };
}

// ---------- agent side ----------

/** The agent server a `Bearer vst_…` token stands for; anything else is 401 (user tokens included). */
export async function authenticateAgent(em: Em, authorization: string | undefined): Promise<VpnServer> {
  const m = /^Bearer\s+(vst_[A-Za-z0-9_-]{20,100})\s*$/.exec(authorization ?? '');
  if (!m) throw unauthorized('A VPN server token is required');
  const server = await em.findOne(VpnServer, {
    tokenHash: sha256Hex(m[1]!),
    kind: 'agent',
    deletedAt: null,
  });
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
  const em = deps.db.orm.em.fork();
  const server = await em.transactional(async (tx) => {
    const now = deps.clock.now();
    const s = await tx.findOne(
      VpnServer,
      { id: serverId, deletedAt: null },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    if (!s) throw unauthorized('Invalid or revoked VPN server token');
    s.publicKey = input.public_key;
    s.status = 'online';
    s.lastReportAt = now;
    s.updatedAt = now;
    if (!s.registeredAt) {
      s.registeredAt = now;
      recordPlatformEventFor(tx, vpnServerCreated, toServerDto(s), s.organization!.id, now);
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

export interface AgentPeers {
  version: number;
  peers: { public_key: string; allowed_ips: string[] }[];
}

async function readPeers(em: Em, serverId: string): Promise<AgentPeers | null> {
  const rows = await em.execute<{ version: number; public_key: string | null; address: string | null }[]>(
    `select s.peers_version as version, c.client_public_key as public_key, c.client_address as address
       from vpn_servers s
       left join vpn_connections c
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
  for (;;) {
    const em = deps.db.orm.em.fork();
    const peers = await readPeers(em, serverId);
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
  const em = deps.db.orm.em.fork();
  return em.transactional(async (tx) => {
    const now = deps.clock.now();
    const server = await tx.findOne(
      VpnServer,
      { id: serverId, deletedAt: null },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    if (!server) throw unauthorized('Invalid or revoked VPN server token');
    server.lastReportAt = now;
    server.load = input.load;
    if (server.status !== 'online') server.status = 'online';
    const connections = await tx.find(
      VpnConnection,
      { server: server.id, peerEnabled: true },
      { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { id: 'asc' } },
    );
    let updated = 0;
    for (const c of connections) {
      const peer = c.clientPublicKey ? byKey.get(c.clientPublicKey) : undefined;
      if (peer) updated += 1;
      const before = c.status;
      const event = applyPeerReport(c, peer, now);
      if (c.status !== before) c.updatedAt = now;
      if (event === 'connected') {
        recordEvent(tx, vpnConnected, toConnectionDetailDto(c, server, now), c.organization.id, now);
      } else if (event === 'disconnected') {
        recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, server, now), c.organization.id, now);
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
  const em = deps.db.orm.em.fork();
  const now = deps.clock.now();
  const cutoff = new Date(now.getTime() - deps.config.vpnAgentOfflineMs);
  const stale = await em.find(
    VpnServer,
    { kind: 'agent', status: 'online', deletedAt: null, lastReportAt: { $lt: cutoff } },
    { fields: ['id'] },
  );
  let n = 0;
  for (const { id } of stale) {
    await em.fork().transactional(async (tx) => {
      const server = await tx.findOne(
        VpnServer,
        { id, status: 'online', deletedAt: null, lastReportAt: { $lt: cutoff } },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (!server) return;
      n += 1;
      server.status = 'offline';
      server.updatedAt = now;
      const connections = await tx.find(
        VpnConnection,
        { server: id, peerEnabled: true, status: { $ne: 'error' } },
        { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { id: 'asc' } },
      );
      for (const c of connections) {
        const event = markUnreachable(c);
        c.updatedAt = now;
        if (event)
          recordEvent(tx, vpnDisconnected, toConnectionDetailDto(c, server, now), c.organization.id, now);
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
