// Test tier: process
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { createOrg, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';
import { createConnection, eventsOf, parseWgQuick } from './vpn-helpers.js';

const run = promisify(execFile);

/** Why this machine cannot run the test, or undefined when it can. */
function skipReason(): string | undefined {
  if (process.platform !== 'linux') return 'network namespaces need Linux';
  if (process.getuid?.() !== 0) return 'network namespaces and wireguard-go need root';
  try {
    accessSync('/dev/net/tun', constants.R_OK | constants.W_OK);
  } catch {
    return '/dev/net/tun is missing (wireguard-go needs it)';
  }
  for (const tool of ['ip', 'wg', 'wireguard-go', 'ping']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) {
      return `${tool} is not installed (apt-get install wireguard-go wireguard-tools iputils-ping)`;
    }
  }
  return undefined;
}

/**
 * End to end, as root: the agent holds a wireguard-go interface inside a "server" network namespace, a "client"
 * namespace joined to it by a veth pair brings the returned configuration up with wireguard-go and `wg`, and a
 * ping crosses the tunnel (docs/vpn-servers.md).
 */
describe('VPN agent end to end in network namespaces (wireguard-go)', function () {
  this.timeout(120_000);
  let s: TestServer;
  let owner: TestUser;
  const id = randomBytes(3).toString('hex');
  const nsS = `vpnts${id}`;
  const nsC = `vpntc${id}`;
  const wgS = `wgs${id}`;
  const wgC = `wgc${id}`;
  const vethS = `vts${id}`;
  const vethC = `vtc${id}`;
  const serverIp = '192.0.2.1';
  const clientIp = '192.0.2.2';
  const port = randomInt(40_000, 60_000);
  let dir: string;
  let agent: ChildProcess | undefined;
  let agentOutput = '';
  let token = '';
  let clientPrivateKey = '';

  const sh = (cmd: string, args: string[]) => run(cmd, args, { timeout: 15_000 });
  const inNs = (ns: string, cmd: string, args: string[], env?: Record<string, string>) =>
    run('ip', ['netns', 'exec', ns, cmd, ...args], { timeout: 15_000, env: { ...process.env, ...env } });
  const serverPeers = async () =>
    (await inNs(nsS, 'wg', ['show', wgS, 'peers'])).stdout.split('\n').filter((l) => l.trim() !== '');

  before(async function () {
    const why = skipReason();
    if (why) {
      // CI installs the tools when it can (.ci/run); a machine without root or /dev/net/tun skips, saying why.
      console.log(`      skipped: ${why}`);
      this.skip();
    }
    s = await sharedServer();
    owner = await createOrg(s.deps, { plan: 'pro' });
    dir = mkdtempSync(join(tmpdir(), 'vpn-agent-e2e-'));
    await sh('ip', ['netns', 'add', nsS]);
    await sh('ip', ['netns', 'add', nsC]);
    await sh('ip', ['link', 'add', vethS, 'type', 'veth', 'peer', 'name', vethC]);
    await sh('ip', ['link', 'set', vethS, 'netns', nsS]);
    await sh('ip', ['link', 'set', vethC, 'netns', nsC]);
    await sh('ip', ['-n', nsS, 'address', 'add', `${serverIp}/24`, 'dev', vethS]);
    await sh('ip', ['-n', nsC, 'address', 'add', `${clientIp}/24`, 'dev', vethC]);
    for (const [ns, dev] of [
      [nsS, vethS],
      [nsC, vethC],
      [nsS, 'lo'],
      [nsC, 'lo'],
    ] as const) {
      await sh('ip', ['-n', ns, 'link', 'set', dev, 'up']);
    }
  });

  after(async () => {
    if (agent && agent.exitCode === null) {
      const exited = new Promise((r) => agent!.once('exit', r));
      agent.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      if (agent.exitCode === null) agent.kill('SIGKILL');
    }
    // Deleting an interface stops its wireguard-go; then the namespaces go (the veth pair with them).
    await sh('ip', ['-n', nsC, 'link', 'del', wgC]).catch(() => undefined);
    await sh('ip', ['-n', nsS, 'link', 'del', wgS]).catch(() => undefined);
    await sh('ip', ['netns', 'del', nsC]).catch(() => undefined);
    await sh('ip', ['netns', 'del', nsS]).catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('registers, places a connection on the real server, carries a ping, reports it active, drops the peer on delete', async () => {
    // The owner creates the server: its token is shown once.
    const created = await http(s.baseUrl, 'POST', '/v1/vpn/servers', {
      token: owner.token,
      body: {
        location: 'eu-west',
        city: 'Dublin',
        country: 'Ireland',
        country_code: 'IE',
        host: serverIp,
        port,
      },
    });
    expect(created.status, created.text).to.equal(201);
    token = created.body.token;
    const serverId: string = created.body.server.id;
    expect(serverId).to.match(/^srv_/);
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });

    // The agent, as documented (npm run vpn-agent), holding its interface inside the server namespace.
    agent = spawn(
      'node_modules/.bin/tsx',
      [
        'vpn-agent/main.ts',
        '--api',
        s.baseUrl,
        '--token-file',
        tokenFile,
        '--interface',
        wgS,
        '--netns',
        nsS,
        '--state-dir',
        join(dir, 'state'),
        '--userspace',
        'always',
        '--report-interval',
        '1',
        '--down-on-exit',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    agent.stdout!.on('data', (d: Buffer) => (agentOutput += d.toString()));
    agent.stderr!.on('data', (d: Buffer) => (agentOutput += d.toString()));

    const listed = await waitFor(
      "the agent's server to be listed online",
      async () => {
        const res = await http(s.baseUrl, 'GET', '/v1/vpn/servers?location=eu-west', { token: owner.token });
        const srv = (res.body.servers as any[]).find((x) => x.id === serverId);
        return srv?.status === 'online' && srv.public_key ? srv : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(listed).to.include({ kind: 'agent', city: 'Dublin', country_code: 'IE', host: serverIp, port });
    expect(listed.protocols).to.deep.equal(['wireguard']);
    expect((await eventsOf(s.deps, owner.organizationId, 'vpn.server.created')).length).to.equal(1);
    // The interface exists (the agent sets it up right after registering) and listens on the server's port, with
    // the registered public key.
    const iface = await waitFor(
      "the WireGuard interface on the server's port",
      async () => {
        const dump = await inNs(nsS, 'wg', ['show', wgS, 'dump']).catch(() => undefined);
        const first = dump?.stdout.split('\n')[0]!.split('\t');
        return first && first[2] === String(port) ? first : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(iface[1]).to.equal(listed.public_key);
    expect(iface[2]).to.equal(String(port));

    // A connection in that location goes to the real server, and its peer is on the interface within seconds.
    const startedAt = Date.now();
    const res = await createConnection(s.baseUrl, owner.token, { location: 'eu-west', name: 'Real' });
    expect(res.status, res.text).to.equal(201);
    const connection = res.body.connection;
    expect(connection.server_id).to.equal(serverId);
    expect(connection.status).to.equal('connecting');
    expect(connection.config.endpoint).to.equal(`${serverIp}:${port}`);
    expect(connection.config.public_key).to.equal(listed.public_key);
    await waitFor(
      'the peer on the interface',
      async () => (await serverPeers()).includes(connection.config.client_public_key),
      { timeoutMs: 10_000 },
    );
    const applyMs = Date.now() - startedAt;
    expect(applyMs).to.be.below(5000);

    // The client side: the returned configuration, brought up with wireguard-go and wg (not wg-quick).
    const [ifaceSection, peerSection] = parseWgQuick(connection.config.wg_quick);
    clientPrivateKey = ifaceSection!.entries.get('PrivateKey')!;
    const keyFile = join(dir, 'client.key');
    const previous = process.umask(0o077);
    try {
      writeFileSync(keyFile, `${clientPrivateKey}\n`, { mode: 0o600 });
    } finally {
      process.umask(previous);
    }
    await inNs(nsC, 'wireguard-go', [wgC], { WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: '1' });
    await inNs(nsC, 'wg', [
      'set',
      wgC,
      'private-key',
      keyFile,
      'peer',
      peerSection!.entries.get('PublicKey')!,
      'endpoint',
      peerSection!.entries.get('Endpoint')!,
      'allowed-ips',
      peerSection!.entries.get('AllowedIPs')!.replace(/\s+/g, ''),
      'persistent-keepalive',
      peerSection!.entries.get('PersistentKeepalive')!,
    ]);
    await sh('ip', ['-n', nsC, 'address', 'add', ifaceSection!.entries.get('Address')!, 'dev', wgC]);
    await sh('ip', ['-n', nsC, 'link', 'set', wgC, 'up']);
    // Only the server's tunnel address through the tunnel (the namespace has no default route to replace).
    await sh('ip', ['-n', nsC, 'route', 'add', '10.64.0.1/32', 'dev', wgC]);

    const ping = await inNs(nsC, 'ping', ['-c', '3', '-i', '0.2', '-W', '3', '10.64.0.1']);
    expect(ping.stdout).to.match(/3 received/);

    // The reports make it active, with real traffic.
    const active = await waitFor(
      'the connection to be active with traffic',
      async () => {
        const r = await http(s.baseUrl, 'GET', `/v1/vpn/connections/${connection.id}`, {
          token: owner.token,
        });
        const c = r.body.connection;
        return c?.status === 'active' && c.data_usage.upload > 0 && c.data_usage.download > 0 ? c : undefined;
      },
      { timeoutMs: 20_000 },
    );
    expect(active.connected_at).to.be.a('string');
    expect(active.last_activity).to.be.a('string');
    expect(active.stats.data_usage.upload).to.be.above(0);
    expect(
      (await eventsOf(s.deps, owner.organizationId, 'vpn.connected')).map((e) => (e.data as any).object.id),
    ).to.include(connection.id);

    // Deleting the connection drops the peer from the interface.
    const del = await http(s.baseUrl, 'DELETE', `/v1/vpn/connections/${connection.id}`, {
      token: owner.token,
    });
    expect(del.status).to.equal(200);
    await waitFor(
      'the peer to leave the interface',
      async () => !(await serverPeers()).includes(connection.config.client_public_key),
      { timeoutMs: 10_000 },
    );
    expect((await eventsOf(s.deps, owner.organizationId, 'vpn.disconnected')).length).to.be.at.least(1);

    // Neither the client's private key nor the server token was ever printed by the agent.
    expect(agentOutput).not.to.include(clientPrivateKey);
    expect(agentOutput).not.to.include(token);
  });
});
