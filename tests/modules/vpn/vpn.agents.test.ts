// Test tier: server
import { expect } from 'chai';
import { sha256Hex } from '../../../server/lib/crypto.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import { VpnConnection } from '../../../server/modules/vpn/vpn-connection.entity.js';
import { VpnServer } from '../../../server/modules/vpn/vpn-server.entity.js';
import { agentReport, sweepOfflineServers } from '../../../server/modules/vpn/vpn-agents.service.js';
import {
  applyPeerReport,
  markUnreachable,
  settleStatus,
  type ReportedState,
} from '../../../server/modules/vpn/vpn.status.js';
import { generateWireguardKeyPair } from '../../../server/modules/vpn/wireguard.js';
import { createOrg, createUser, type TestUser } from '../../support/factories.js';
import { FakeClock } from '../../support/fake-clock.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { createConnection, eventsOf } from './vpn-helpers.js';

describe('VPN connection status from agent reports (pure)', () => {
  const t0 = new Date('2026-11-21T08:00:00.000Z');
  const at = (s: number) => new Date(t0.getTime() + s * 1000);
  const fresh = (): ReportedState => ({
    status: 'connecting',
    uploadBytes: 0,
    downloadBytes: 0,
    reportedRx: 0,
    reportedTx: 0,
  });

  it('stays connecting until the first handshake, then active with connected_at at the handshake', () => {
    const c = fresh();
    expect(applyPeerReport(c, undefined, at(0))).to.equal(null);
    expect(applyPeerReport(c, { handshakeAgeSeconds: null, rxBytes: 0, txBytes: 0 }, at(1))).to.equal(null);
    expect(c.status).to.equal('connecting');
    expect(applyPeerReport(c, { handshakeAgeSeconds: 2, rxBytes: 500, txBytes: 300 }, at(10))).to.equal(
      'connected',
    );
    expect(c.status).to.equal('active');
    expect(c.connectedAt).to.deep.equal(at(8));
    expect([c.uploadBytes, c.downloadBytes]).to.deep.equal([500, 300]);
    expect(c.lastActivity).to.deep.equal(at(10));
  });

  it('adds counter deltas, and counts reset counters (peer set again) as new traffic', () => {
    const c = fresh();
    applyPeerReport(c, { handshakeAgeSeconds: 1, rxBytes: 1000, txBytes: 2000 }, at(0));
    applyPeerReport(c, { handshakeAgeSeconds: 1, rxBytes: 1500, txBytes: 2600 }, at(10));
    expect([c.uploadBytes, c.downloadBytes]).to.deep.equal([1500, 2600]);
    applyPeerReport(c, { handshakeAgeSeconds: 1, rxBytes: 100, txBytes: 50 }, at(20));
    expect([c.uploadBytes, c.downloadBytes]).to.deep.equal([1600, 2650]);
  });

  it('goes inactive 180 s after the latest handshake (vpn.disconnected), active again on a new one', () => {
    const c = fresh();
    applyPeerReport(c, { handshakeAgeSeconds: 0, rxBytes: 1, txBytes: 1 }, at(0));
    expect(applyPeerReport(c, { handshakeAgeSeconds: 179, rxBytes: 1, txBytes: 1 }, at(179))).to.equal(null);
    expect(c.status).to.equal('active');
    expect(applyPeerReport(c, { handshakeAgeSeconds: 180, rxBytes: 1, txBytes: 1 }, at(180))).to.equal(
      'disconnected',
    );
    expect(c.status).to.equal('inactive');
    expect(c.connectedAt).to.equal(null);
    expect(c.statusMessage).to.match(/handshake/);
    expect(applyPeerReport(c, { handshakeAgeSeconds: 0, rxBytes: 5, txBytes: 5 }, at(300))).to.equal(
      'connected',
    );
    expect(c.connectedAt).to.deep.equal(at(300));
  });

  it('an unreachable server puts the connection in error (vpn.disconnected only when it was active)', () => {
    const c = fresh();
    expect(markUnreachable(c)).to.equal(null);
    expect(c.status).to.equal('error');
    const d = fresh();
    applyPeerReport(d, { handshakeAgeSeconds: 0, rxBytes: 1, txBytes: 1 }, at(0));
    expect(markUnreachable(d)).to.equal('disconnected');
    // The next report brings it back from what the handshake says.
    expect(settleStatus(d, at(5))).to.equal('connected');
  });
});

describe('VPN agent servers over HTTP', function () {
  this.timeout(60_000);
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  const host = () => `agent-${Math.random().toString(36).slice(2, 10)}.example.net`;

  async function newServer(owner: TestUser, location = 'eu-west') {
    const res = await http(s.baseUrl, 'POST', '/v1/vpn/servers', {
      token: owner.token,
      body: { location, city: 'Dublin', country: 'Ireland', country_code: 'ie', host: host(), port: 51820 },
    });
    expect(res.status, res.text).to.equal(201);
    return { id: res.body.server.id as string, token: res.body.token as string, server: res.body.server };
  }

  const agent = (token: string, method: 'GET' | 'POST', path: string, body?: unknown) =>
    http(s.baseUrl, method, `/v1/agent${path}`, { token, ...(body !== undefined ? { body } : {}) });

  async function registered(owner: TestUser, location = 'eu-west') {
    const srv = await newServer(owner, location);
    const keys = generateWireguardKeyPair();
    const reg = await agent(srv.token, 'POST', '/register', { public_key: keys.publicKey });
    expect(reg.status, reg.text).to.equal(200);
    return { ...srv, publicKey: keys.publicKey, registration: reg.body };
  }

  function withClock(clock: FakeClock): AppDeps {
    return { ...s.deps, clock };
  }

  it('owner creates a server: the token is shown once and stored hashed; members cannot', async () => {
    const owner = await createOrg(s.deps);
    const srv = await newServer(owner);
    expect(srv.token).to.match(/^vst_[A-Za-z0-9_-]{43}$/);
    expect(srv.server).to.include({ kind: 'agent', status: 'offline', country_code: 'IE', public_key: '' });
    const stored = await s.deps.db.orm.em
      .fork()
      .findOneOrFail(VpnServer, srv.id, { populate: ['tokenHash'] });
    expect(stored.tokenHash).to.equal(sha256Hex(srv.token));
    expect(JSON.stringify(stored)).not.to.include(srv.token);
    // Not in the catalogue until its agent registers.
    const list = await http(s.baseUrl, 'GET', '/v1/vpn/servers', { token: owner.token });
    expect((list.body.servers as any[]).map((x) => x.id)).not.to.include(srv.id);
    const member = await createUser(s.deps, owner.organizationId);
    const refused = await http(s.baseUrl, 'POST', '/v1/vpn/servers', {
      token: member.token,
      body: { location: 'eu-west', city: 'X', country: 'Y', country_code: 'IE', host: host() },
    });
    expect(refused.status).to.equal(403);
  });

  it('agent endpoints take the server token only: user tokens, unknown and revoked tokens are 401', async () => {
    const owner = await createOrg(s.deps);
    const srv = await registered(owner);
    expect((await agent(owner.token, 'GET', '/peers')).status).to.equal(401);
    expect((await agent(`vst_${'A'.repeat(43)}`, 'GET', '/peers')).status).to.equal(401);
    expect((await agent(srv.token, 'GET', '/peers')).status).to.equal(200);
    const del = await http(s.baseUrl, 'DELETE', `/v1/vpn/servers/${srv.id}`, { token: owner.token });
    expect(del.status).to.equal(200);
    expect((await agent(srv.token, 'GET', '/peers')).status).to.equal(401);
    expect((await agent(srv.token, 'POST', '/report', { load: 1, peers: [] })).status).to.equal(401);
    expect((await eventsOf(s.deps, owner.organizationId, 'vpn.server.deleted')).length).to.equal(1);
  });

  it('registration lists the server to its organization only; another organization never sees nor uses it', async () => {
    const owner = await createOrg(s.deps);
    const other = await createOrg(s.deps);
    const srv = await registered(owner, 'ap-northeast');
    expect(srv.registration).to.include({ server_id: srv.id, listen_port: 51820, address: '10.64.0.1/10' });
    const mine = await http(s.baseUrl, 'GET', '/v1/vpn/servers?location=ap-northeast', {
      token: owner.token,
    });
    const listed = (mine.body.servers as any[]).find((x) => x.id === srv.id);
    expect(listed).to.include({ kind: 'agent', status: 'online', public_key: srv.publicKey });
    const theirs = await http(s.baseUrl, 'GET', '/v1/vpn/servers', { token: other.token });
    expect((theirs.body.servers as any[]).map((x) => x.id)).not.to.include(srv.id);
    expect((await eventsOf(s.deps, owner.organizationId, 'vpn.server.created')).length).to.equal(1);
    expect((await eventsOf(s.deps, other.organizationId, 'vpn.server.created')).length).to.equal(0);
    // Placement: the owner's connection goes to the real server, the other organization's to the simulated one.
    const a = await createConnection(s.baseUrl, owner.token, { location: 'ap-northeast' });
    expect(a.body.connection.server_id).to.equal(srv.id);
    expect(a.body.connection.config.endpoint).to.equal(`${srv.server.host}:51820`);
    expect(a.body.connection.config.public_key).to.equal(srv.publicKey);
    const b = await createConnection(s.baseUrl, other.token, { location: 'ap-northeast' });
    expect(b.body.connection.server_id).not.to.equal(srv.id);
    // Another organization cannot delete it (404).
    const del = await http(s.baseUrl, 'DELETE', `/v1/vpn/servers/${srv.id}`, { token: other.token });
    expect(del.status).to.equal(404);
  });

  it('an agent reads only its own peers (public keys and addresses) and reports for others are ignored', async () => {
    const owner = await createOrg(s.deps);
    const a = await registered(owner, 'us-west');
    const created = await createConnection(s.baseUrl, owner.token, { location: 'us-west' });
    const conn = created.body.connection;
    expect(conn.server_id).to.equal(a.id);
    const b = await registered(owner, 'us-east');
    const peersA = await agent(a.token, 'GET', '/peers');
    expect(peersA.body.peers).to.deep.equal([
      { public_key: conn.config.client_public_key, allowed_ips: [conn.config.address] },
    ]);
    expect(peersA.text).not.to.match(/PrivateKey|private_key/);
    const peersB = await agent(b.token, 'GET', '/peers');
    expect(peersB.body.peers).to.deep.equal([]);
    // B reports A's peer: nothing changes on A's connection.
    const rep = await agent(b.token, 'POST', '/report', {
      load: 3,
      peers: [
        { public_key: conn.config.client_public_key, handshake_age_seconds: 1, rx_bytes: 99, tx_bytes: 99 },
      ],
    });
    expect(rep.status).to.equal(200);
    expect(rep.body.peers_updated).to.equal(0);
    const after = await http(s.baseUrl, 'GET', `/v1/vpn/connections/${conn.id}`, { token: owner.token });
    expect(after.body.connection).to.include({ status: 'connecting' });
    expect(after.body.connection.data_usage).to.deep.equal({ upload: 0, download: 0 });
  });

  it('long poll: answers within a second of a connection being created, and again when it is deleted', async () => {
    const owner = await createOrg(s.deps);
    const srv = await registered(owner, 'ca-central');
    const first = await agent(srv.token, 'GET', '/peers');
    const started = Date.now();
    const poll = agent(srv.token, 'GET', `/peers?since=${first.body.version}&wait=20`);
    await new Promise((r) => setTimeout(r, 200));
    const created = await createConnection(s.baseUrl, owner.token, { location: 'ca-central' });
    const changed = await poll;
    expect(Date.now() - started).to.be.below(5000);
    expect(changed.body.version).to.be.above(first.body.version);
    expect(changed.body.peers.map((p: any) => p.public_key)).to.deep.equal([
      created.body.connection.config.client_public_key,
    ]);
    const poll2 = agent(srv.token, 'GET', `/peers?since=${changed.body.version}&wait=20`);
    await http(s.baseUrl, 'DELETE', `/v1/vpn/connections/${created.body.connection.id}`, {
      token: owner.token,
    });
    expect((await poll2).body.peers).to.deep.equal([]);
  });

  it('status, usage and events follow the reports (fake clock); offline after the bound, back on the next report', async () => {
    const owner = await createOrg(s.deps);
    const srv = await registered(owner, 'sa-east');
    const created = await createConnection(s.baseUrl, owner.token, {
      location: 'sa-east',
      protocol: 'wireguard',
    });
    const conn = created.body.connection;
    expect(conn.server_id).to.equal(srv.id);
    const clock = new FakeClock(new Date(Date.now() + 1000));
    const deps = withClock(clock);
    const peer = (age: number | null, rx: number, tx: number) => ({
      load: 12,
      peers: [
        { public_key: conn.config.client_public_key, handshake_age_seconds: age, rx_bytes: rx, tx_bytes: tx },
      ],
    });
    const stored = () => s.deps.db.orm.em.fork().findOneOrFail(VpnConnection, conn.id);
    const read = async () =>
      (await http(s.baseUrl, 'GET', `/v1/vpn/connections/${conn.id}`, { token: owner.token })).body
        .connection;

    await agentReport(deps, srv.id, peer(null, 0, 0));
    expect((await stored()).status).to.equal('connecting');
    await agentReport(deps, srv.id, peer(1, 4000, 9000));
    let c = await read();
    expect(c.status).to.equal('active');
    expect(c.data_usage).to.deep.equal({ upload: 4000, download: 9000 });
    expect(c.connected_at).to.equal(new Date(clock.now().getTime() - 1000).toISOString());
    expect((await eventsOf(s.deps, owner.organizationId, 'vpn.connected')).length).to.equal(1);

    // Reports keep coming but the handshake ages past 180 s: inactive, vpn.disconnected.
    clock.advance(181_000);
    await agentReport(deps, srv.id, peer(182, 4000, 9000));
    c = await read();
    expect(c.status).to.equal('inactive');
    expect(c.status_message).to.match(/handshake/);
    expect((await eventsOf(s.deps, owner.organizationId, 'vpn.disconnected')).length).to.equal(1);

    // A new handshake: active again. Then the agent goes silent past the bound: offline, connection in error.
    await agentReport(deps, srv.id, peer(0, 5000, 9500));
    expect((await read()).status).to.equal('active');
    const serverStatus = async () => (await s.deps.db.orm.em.fork().findOneOrFail(VpnServer, srv.id)).status;
    clock.advance(s.deps.config.vpnAgentOfflineMs - 1000);
    await sweepOfflineServers(deps);
    expect(await serverStatus()).to.equal('online');
    expect((await read()).status).to.equal('active');
    clock.advance(2000);
    expect(await sweepOfflineServers(deps)).to.be.at.least(1);
    expect(await serverStatus()).to.equal('offline');
    c = await read();
    expect(c.status).to.equal('error');
    expect(c.status_message).to.match(/not reporting/);
    expect((await eventsOf(s.deps, owner.organizationId, 'vpn.disconnected')).length).to.equal(2);
    const listed = await http(s.baseUrl, 'GET', '/v1/vpn/servers?location=sa-east', { token: owner.token });
    expect((listed.body.servers as any[]).find((x) => x.id === srv.id)).to.include({ status: 'offline' });

    // The agent is back: online, and the connection follows its handshake again.
    await agentReport(deps, srv.id, peer(2, 5200, 9900));
    c = await read();
    expect(c.status).to.equal('active');
    expect(c.data_usage).to.deep.equal({ upload: 5200, download: 9900 });

    // Deleting the server: its connection goes to error and its peer is no longer wanted.
    await http(s.baseUrl, 'DELETE', `/v1/vpn/servers/${srv.id}`, { token: owner.token });
    const gone = await stored();
    expect(gone.status).to.equal('error');
    expect(gone.peerEnabled).to.equal(false);
  });

  it('disconnecting drops the peer from the agent set; reconnecting adds it back as connecting', async () => {
    const owner = await createOrg(s.deps);
    const srv = await registered(owner, 'eu-central');
    const created = await createConnection(s.baseUrl, owner.token, { location: 'eu-central' });
    const id = created.body.connection.id;
    const off = await http(s.baseUrl, 'PUT', `/v1/vpn/connections/${id}`, {
      token: owner.token,
      body: { status: 'inactive' },
    });
    expect(off.body.connection.status).to.equal('inactive');
    expect((await agent(srv.token, 'GET', '/peers')).body.peers).to.deep.equal([]);
    const on = await http(s.baseUrl, 'PUT', `/v1/vpn/connections/${id}`, {
      token: owner.token,
      body: { status: 'active' },
    });
    expect(on.body.connection.status).to.equal('connecting');
    expect((await agent(srv.token, 'GET', '/peers')).body.peers).to.have.length(1);
  });
});
