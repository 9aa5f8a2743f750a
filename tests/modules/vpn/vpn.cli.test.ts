// Test tier: process
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { runCli, type CliIo } from '../../../server/cli.js';
import { Event } from '../../../server/events/event.entity.js';
import { VpnConnection } from '../../../server/modules/vpn/vpn-connection.entity.js';
import { VpnServer } from '../../../server/modules/vpn/vpn-server.entity.js';
import { wireguardPublicKey } from '../../../server/modules/vpn/wireguard.js';
import { createOrg } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';
import { createConnection, eventsOf } from './vpn-helpers.js';

function capture(): CliIo & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, out: (l) => stdout.push(l), err: (l) => stderr.push(l) };
}

let hostCounter = 0;
const uniqueHost = () => `t${Date.now().toString(36)}${hostCounter++}.vpn.example.net`;

describe('operator CLI (npm run cli)', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  async function cli(argv: string[]) {
    const io = capture();
    const code = await runCli(argv, { db: s.deps.db, io });
    return { code, ...io };
  }

  /** The `vpn.server.*` events about one server, as every organization will receive them. */
  async function serverEvents(type: string, serverId: string): Promise<Event[]> {
    const all = await s.deps.db.orm.em.fork().find(Event, { type });
    return all.filter((e) => (e.data.object as { id?: string }).id === serverId);
  }

  it('servers:add adds a server with its own key pair and tells every organization', async () => {
    const a = await createOrg(s.deps);
    const host = uniqueHost();
    const res = await cli([
      'servers:add',
      '--location',
      'eu-central',
      '--city',
      'Zurich',
      '--country',
      'Switzerland',
      '--country-code',
      'ch',
      '--protocols',
      'wireguard,openvpn',
      '--host',
      host,
      '--port',
      '51821',
      '--json',
    ]);
    expect(res.code, res.stderr.join('\n')).to.equal(0);
    const server = JSON.parse(res.stdout.join('\n'));
    expect(server).to.include({
      location: 'eu-central',
      city: 'Zurich',
      country_code: 'CH',
      host,
      port: 51821,
      status: 'online',
    });
    expect(server).not.to.have.property('private_key');
    const stored = await s.deps.db.orm.em
      .fork()
      .findOneOrFail(VpnServer, server.id, { populate: ['privateKey'] });
    expect(wireguardPublicKey(stored.privateKey)).to.equal(server.public_key);

    // One platform event, committed with the server; the relay fans it out to every organization.
    const events = await serverEvents('vpn.server.created', server.id);
    expect(events).to.have.length(1);
    expect(events[0]!.organizationId).to.equal(null);
    expect(events[0]!.data.object).to.deep.equal(server);

    // Users see it in the catalogue right away and can connect to it.
    const list = await http(s.baseUrl, 'GET', '/v1/vpn/servers?location=eu-central', { token: a.token });
    expect(list.body.servers.map((x: any) => x.id)).to.include(server.id);
    await cli(['servers:remove', server.id]);
  });

  it('servers:remove moves its live connections to error (vpn.disconnected) and tells every organization', async () => {
    const owner = await createOrg(s.deps);
    const host = uniqueHost();
    const added = await cli([
      'servers:add',
      '--location',
      'ap-northeast',
      '--city',
      'Osaka',
      '--country',
      'Japan',
      '--country-code',
      'JP',
      '--protocols',
      'wireguard',
      '--host',
      host,
      '--load',
      '0',
      '--json',
    ]);
    const server = JSON.parse(added.stdout.join('\n'));
    // `--load 0` makes it the least loaded server of its location, so new connections land on it.
    const em = s.deps.db.orm.em.fork();
    const active = (await createConnection(s.baseUrl, owner.token, { location: 'ap-northeast' })).body
      .connection;
    expect(active.server_id).to.equal(server.id);
    await waitFor('the connection to be active', async () => {
      const c = await em.fork().findOneOrFail(VpnConnection, active.id);
      return c.status === 'active';
    });
    const inactive = (await createConnection(s.baseUrl, owner.token, { location: 'ap-northeast' })).body
      .connection;
    await http(s.baseUrl, 'PUT', `/v1/vpn/connections/${inactive.id}`, {
      token: owner.token,
      body: { status: 'inactive' },
    });

    const res = await cli(['servers:remove', server.id]);
    expect(res.code, res.stderr.join('\n')).to.equal(0);
    expect(res.stdout.join('\n')).to.include(server.id).and.include('1 connection');

    const get = (id: string) => http(s.baseUrl, 'GET', `/v1/vpn/connections/${id}`, { token: owner.token });
    const gone = (await get(active.id)).body.connection;
    expect(gone).to.include({ status: 'error', connected_at: null });
    expect(gone.status_message).to.be.a('string');
    expect((await get(inactive.id)).body.connection.status).to.equal('inactive');
    const disconnected = await eventsOf(s.deps, owner.organizationId, 'vpn.disconnected');
    // The active one was disconnected by the removal, once (the other one was already inactive).
    expect(disconnected.filter((e) => (e.data.object as any).id === active.id)).to.have.length(1);
    expect(await serverEvents('vpn.server.deleted', server.id)).to.have.length(1);

    // Out of the catalogue; reconnecting is refused; a second removal is not found.
    const list = await http(s.baseUrl, 'GET', '/v1/vpn/servers', { token: owner.token });
    expect(list.body.servers.map((x: any) => x.id)).not.to.include(server.id);
    const again = await http(s.baseUrl, 'PUT', `/v1/vpn/connections/${active.id}`, {
      token: owner.token,
      body: { status: 'active' },
    });
    expect(again.status).to.equal(409);
    const twice = await cli(['servers:remove', server.id]);
    expect(twice.code).to.equal(1);
    expect(twice.stderr.join('\n')).to.include('NOT_FOUND');
  });

  it('refuses bad input with one line per problem and changes nothing', async () => {
    const before = await s.deps.db.orm.em.fork().count(VpnServer, {});
    const res = await cli([
      'servers:add',
      '--location',
      'moon',
      '--city',
      'X',
      '--country',
      'Y',
      '--country-code',
      'XYZ',
      '--protocols',
      'pptp',
      '--host',
      'bad host',
      '--port',
      '70000',
    ]);
    expect(res.code).to.equal(1);
    const text = res.stderr.join('\n');
    for (const flag of ['--location', '--country-code', '--protocols', '--host', '--port'])
      expect(text).to.include(flag);
    expect(await s.deps.db.orm.em.fork().count(VpnServer, {})).to.equal(before);
    expect((await cli(['servers:nope'])).code).to.equal(2);
    expect((await cli([])).code).to.equal(2);
    expect((await cli(['--help'])).code).to.equal(0);
  });

  it('servers:list prints the catalogue', async () => {
    const res = await cli(['servers:list']);
    expect(res.code).to.equal(0);
    expect(res.stdout.length).to.be.at.least(8);
    expect(res.stdout.join('\n')).to.include('srv_').and.include('wireguard');
  });

  it('runs as a separate process against the database of the configuration', async function () {
    this.timeout(90_000);
    const dataDir = mkdtempSync(join(tmpdir(), 'vpn-cli-'));
    try {
      const env: Record<string, string> = {
        ...(process.env as Record<string, string>),
        DATA_DIR: dataDir,
        LOG_LEVEL: 'silent',
      };
      const args = [
        'servers:add',
        '--location',
        'us-west',
        '--city',
        'Seattle',
        '--country',
        'United States',
        '--country-code',
        'US',
        '--protocols',
        'wireguard',
        '--host',
        uniqueHost(),
        '--json',
      ];
      const run = spawnSync(process.execPath, ['--import', 'tsx', 'server/cli.ts', ...args], {
        env,
        encoding: 'utf8',
        timeout: 80_000,
      });
      expect(run.status, run.stderr).to.equal(0);
      const server = JSON.parse(run.stdout);
      expect(server.id).to.match(/^srv_/);
      expect(server.city).to.equal('Seattle');
      if (process.env.DATABASE_URL) await cli(['servers:remove', server.id]);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
