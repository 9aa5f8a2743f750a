// Test tier: unit
import { expect } from 'chai';
import type { Actor } from '../../../server/access/actor.js';
import type { ActorContext, AppDeps } from '../../../server/kit/deps.js';
import { newId } from '../../../server/lib/ids.js';
import { sha256Hex } from '../../../server/lib/crypto.js';
import {
  agentPeers,
  agentReport,
  PeersHub,
  sweepOfflineServers,
} from '../../../server/modules/vpn/vpn-agents.service.js';
import type { ActivateJobData } from '../../../server/modules/vpn/vpn.jobs.js';
import { activateConnection } from '../../../server/modules/vpn/vpn-activation.service.js';
import type { VpnRuntime } from '../../../server/modules/vpn/vpn.module.js';
import * as vpn from '../../../server/modules/vpn/vpn.service.js';
import { removeServer } from '../../../server/modules/vpn/vpn-servers.service.js';
import { clientAddress, generateWireguardKeyPair } from '../../../server/modules/vpn/wireguard.js';
import { InMemoryVpnRepository } from './in-memory-vpn.repository.js';
import { NO_EM } from '../../support/in-memory.js';
import { appRejection, unitActor } from '../../support/unit.js';

/**
 * The VPN services against an in-memory repository (./in-memory-vpn.repository.ts): no server, no database. The job
 * queue is a list the test drains by running the activation job itself.
 */

interface Harness {
  deps: AppDeps;
  repo: InMemoryVpnRepository;
  jobs: ActivateJobData[];
  clock: { t: number };
  ctx(actor: Actor): ActorContext;
  drain(): Promise<void>;
}

function harness(): Harness {
  const repo = new InMemoryVpnRepository();
  const jobs: ActivateJobData[] = [];
  const clock = { t: Date.parse('2026-11-01T00:00:00.000Z') };
  const silent = () => undefined;
  const runtime: VpnRuntime = { repository: repo, peers: new PeersHub() };
  const deps = {
    config: { provisioningDelayMs: 0, vpnAgentOfflineMs: 30_000 },
    clock: { now: () => new Date(clock.t) },
    log: { info: silent, warn: silent, error: silent, debug: silent },
    jobs: {
      send: async (_job: unknown, data: ActivateJobData) => {
        jobs.push(data);
        return 'job';
      },
      notify: silent,
    },
    modules: { vpn: runtime },
  } as unknown as AppDeps;
  return {
    deps,
    repo,
    jobs,
    clock,
    ctx: (actor) => ({ em: NO_EM, deps, actor, requestId: 'req', ip: '127.0.0.1', userAgent: undefined }),
    async drain() {
      while (jobs.length > 0) await activateConnection({ em: NO_EM, deps }, jobs.shift()!);
    },
  };
}

let n = 0;
const actor = (role: Actor['role'] = 'owner', organizationId?: string): Actor => ({
  ...unitActor({ role, organizationId }),
  plan: 'starter',
});

/** A server of the shared simulated catalogue. */
function simulatedServer(h: Harness, location = 'us-east', load = 10) {
  const now = new Date(h.clock.t);
  return h.repo.createServer(NO_EM, {
    id: newId('srv'),
    createdAt: now,
    updatedAt: now,
    location: location as never,
    city: 'Ashburn',
    country: 'United States',
    countryCode: 'US',
    host: `vpn-${++n}.example.net`,
    port: 51820,
    protocols: ['wireguard', 'openvpn'],
    load,
    publicKey: generateWireguardKeyPair().publicKey,
    privateKey: '',
    deletedAt: null,
  });
}

/** A registered agent server of the organization, its token `token`. */
function agentServer(h: Harness, organizationId: string, token: string) {
  const now = new Date(h.clock.t);
  return h.repo.createServer(NO_EM, {
    id: newId('srv'),
    createdAt: now,
    updatedAt: now,
    kind: 'agent',
    organization: organizationId,
    tokenHash: sha256Hex(token),
    location: 'eu-west',
    city: 'Dublin',
    country: 'Ireland',
    countryCode: 'IE',
    host: `agent-${++n}.example.net`,
    port: 51820,
    protocols: ['wireguard'],
    status: 'online',
    publicKey: generateWireguardKeyPair().publicKey,
    privateKey: '',
    registeredAt: now,
    lastReportAt: now,
    deletedAt: null,
  });
}

describe('vpn services (in-memory repository)', () => {
  it('creates a WireGuard connection on the least loaded server, activates it, and lists it', async () => {
    const h = harness();
    simulatedServer(h, 'us-east', 50);
    const light = simulatedServer(h, 'us-east', 5);
    const owner = actor();
    const created = await vpn.createConnection(h.ctx(owner), {
      name: 'laptop',
      location: 'us-east',
      protocol: 'wireguard',
    });
    const c = created.connection;
    expect(c.status).to.equal('connecting');
    expect(c.server_id).to.equal(light.id);
    // The server's next tunnel address; the client configuration is handed out once.
    expect(c.config.address).to.equal(clientAddress(2));
    expect(c.config.wg_quick).to.be.a('string');
    expect(h.jobs).to.deep.equal([{ connection_id: c.id, generation: 1 }]);

    await h.drain();
    const got = await vpn.getConnection(h.ctx(owner), { id: c.id });
    expect(got.connection.status).to.equal('active');
    expect(got.connection.config.wg_quick).to.equal(null);
    expect(h.repo.events.map((e) => e.type)).to.deep.equal(['vpn.connected']);

    const list = await vpn.listConnections(h.ctx(owner), { page: 1, limit: 20 });
    expect(list.connections.map((x) => x.id)).to.deep.equal([c.id]);
  });

  it('says where a protocol is available when the location has no server for it (400)', async () => {
    const h = harness();
    simulatedServer(h, 'eu-west');
    const err = await appRejection(
      vpn.createConnection(h.ctx(actor()), { name: 'x', location: 'us-east', protocol: 'wireguard' }),
    );
    expect(err.status).to.equal(400);
    expect(err.message).to.contain('wireguard is available in: eu-west');
    expect(h.repo.connections).to.have.length(0);
  });

  it('deactivating an active connection emits vpn.disconnected; a stale activation does not revive it', async () => {
    const h = harness();
    simulatedServer(h);
    const owner = actor();
    const { connection } = await vpn.createConnection(h.ctx(owner), {
      name: 'phone',
      location: 'us-east',
      protocol: 'openvpn',
    });
    await h.drain();
    h.clock.t += 60_000;
    const off = await vpn.updateConnection(h.ctx(owner), { id: connection.id, status: 'inactive' });
    expect(off.connection.status).to.equal('inactive');
    expect(h.repo.events.map((e) => e.type)).to.deep.equal(['vpn.connected', 'vpn.disconnected']);

    // The first attempt's job, run late, leaves the connection as it is.
    await activateConnection({ em: NO_EM, deps: h.deps }, { connection_id: connection.id, generation: 1 });
    expect(h.repo.connections[0]!.status).to.equal('inactive');
  });

  it("a member neither sees nor deletes another user's connection (404), the owner deletes it", async () => {
    const h = harness();
    simulatedServer(h);
    const owner = actor('owner');
    const member = actor('member', owner.organizationId);
    const { connection } = await vpn.createConnection(h.ctx(owner), {
      name: 'desk',
      location: 'us-east',
      protocol: 'openvpn',
    });
    expect((await appRejection(vpn.getConnection(h.ctx(member), { id: connection.id }))).status).to.equal(
      404,
    );
    expect((await appRejection(vpn.deleteConnection(h.ctx(member), { id: connection.id }))).status).to.equal(
      404,
    );
    const memberList = await vpn.listConnections(h.ctx(member), {
      page: 1,
      limit: 20,
      user_id: owner.userId,
    });
    expect(memberList.connections).to.have.length(0);

    await vpn.deleteConnection(h.ctx(owner), { id: connection.id });
    expect(h.repo.connections).to.have.length(0);
  });

  it('removing a server moves its live connections to error, with vpn.disconnected for the active ones', async () => {
    const h = harness();
    const server = simulatedServer(h);
    const owner = actor();
    const first = await vpn.createConnection(h.ctx(owner), {
      name: 'a',
      location: 'us-east',
      protocol: 'openvpn',
    });
    await h.drain();
    await vpn.createConnection(h.ctx(owner), { name: 'b', location: 'us-east', protocol: 'openvpn' });
    const result = await removeServer(h.repo, NO_EM, server.id, new Date(h.clock.t));
    expect(result.connectionsAffected).to.equal(2);
    expect(h.repo.connections.map((c) => c.status)).to.deep.equal(['error', 'error']);
    const types = h.repo.events.map((e) => e.type);
    expect(types).to.deep.equal(['vpn.connected', 'vpn.disconnected', 'vpn.server.deleted']);
    expect(h.repo.events[1]!.payload).to.include({ id: first.connection.id });
  });

  it('an agent server: a peer goes active on a handshake, and to error when the agent stops reporting', async () => {
    const h = harness();
    const owner = actor();
    const server = agentServer(h, owner.organizationId, 'vst_token');
    const { connection } = await vpn.createConnection(h.ctx(owner), {
      name: 'agent peer',
      location: 'eu-west',
      protocol: 'wireguard',
    });
    expect(connection.server_id).to.equal(server.id);
    // No simulated activation on an agent server: the agent's reports decide.
    expect(h.jobs).to.have.length(0);
    const peers = await agentPeers(h.deps, server.id, {});
    expect(peers.version).to.equal(1);
    expect(peers.peers).to.deep.equal([
      { public_key: connection.config.client_public_key, allowed_ips: [connection.config.address] },
    ]);

    const report = await agentReport(h.deps, server.id, {
      load: 3,
      peers: [
        {
          public_key: connection.config.client_public_key,
          handshake_age_seconds: 1,
          rx_bytes: 10,
          tx_bytes: 20,
        },
      ],
    });
    expect(report).to.deep.equal({ success: true, version: 1, peers_updated: 1 });
    expect(h.repo.connections[0]!.status).to.equal('active');

    h.clock.t += 31_000;
    expect(await sweepOfflineServers(h.deps)).to.equal(1);
    expect(server.status).to.equal('offline');
    expect(h.repo.connections[0]!.status).to.equal('error');
    expect(h.repo.events.map((e) => e.type)).to.deep.equal(['vpn.connected', 'vpn.disconnected']);
  });

  it('deleting the organization disconnects its connections and retires its agent servers', async () => {
    const h = harness();
    simulatedServer(h);
    const owner = actor();
    const agent = agentServer(h, owner.organizationId, 'vst_other');
    await vpn.createConnection(h.ctx(owner), { name: 'a', location: 'us-east', protocol: 'openvpn' });
    await h.drain();
    await vpn.createConnection(h.ctx(owner), { name: 'b', location: 'eu-west', protocol: 'wireguard' });
    const now = new Date(h.clock.t);
    await vpn.disconnectOrganization(NO_EM, { id: owner.organizationId }, now, h.deps);
    expect(h.repo.connections.map((c) => [c.status, c.peerEnabled])).to.deep.equal([
      ['inactive', false],
      ['inactive', false],
    ]);
    expect(agent.deletedAt).to.deep.equal(now);
    expect(h.repo.events.map((e) => e.type)).to.deep.equal(['vpn.connected', 'vpn.disconnected']);
  });
});
