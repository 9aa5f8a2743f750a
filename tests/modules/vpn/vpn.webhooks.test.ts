// Test tier: server
import { expect } from 'chai';
import { runCli } from '../../../server/cli.js';
import { createOrg, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { startReceiver, verifyWithThirdPartyLibraries, type Receiver } from '../webhooks/receiver.js';
import { createWebhook } from '../webhooks/webhook-helpers.js';
import { createConnection } from './vpn-helpers.js';

describe('VPN events reach webhooks', () => {
  let s: TestServer;
  let rx: Receiver;
  before(async () => {
    s = await sharedServer();
  });
  beforeEach(async () => {
    rx = await startReceiver();
  });
  afterEach(async () => {
    await rx.close();
  });

  const webhook = (owner: TestUser, events: string[]) => createWebhook(s, owner, rx.url, events);

  it('delivers vpn.connected and vpn.disconnected of a connection made over HTTP, signed and verifiable', async () => {
    const owner = await createOrg(s.deps);
    const wh = await webhook(owner, ['vpn.connected', 'vpn.disconnected']);
    const created = await createConnection(s.baseUrl, owner.token);
    const id = created.body.connection.id as string;
    const [connected] = await rx.waitFor((r) => r.length >= 1);
    expect(connected!.headers['x-vpn-event']).to.equal('vpn.connected');
    expect(await verifyWithThirdPartyLibraries(wh.secret, connected!)).to.equal(true);
    const body = connected!.body;
    expect(body).to.include({ type: 'vpn.connected', organization_id: owner.organizationId });
    expect(body.data.object).to.include({ id, status: 'active', name: 'Laptop' });
    expect(body.data.object.connected_at).to.be.a('string');
    // The client private key never travels in events.
    expect(body.data.object.config.wg_quick).to.equal(null);
    expect(connected!.raw.toString()).not.to.include(created.body.connection.config.wg_quick.split('\n')[2]);

    const del = await http(s.baseUrl, 'DELETE', `/v1/vpn/connections/${id}`, { token: owner.token });
    expect(del.status).to.equal(200);
    const reqs = await rx.waitFor((r) => r.length >= 2);
    expect(reqs[1]!.headers['x-vpn-event']).to.equal('vpn.disconnected');
    expect(reqs[1]!.body.data.object.id).to.equal(id);
    expect(await verifyWithThirdPartyLibraries(wh.secret, reqs[1]!)).to.equal(true);

    const deliveries = await http(s.baseUrl, 'GET', `/v1/webhooks/${wh.id}/deliveries`, {
      token: owner.token,
    });
    expect(deliveries.body.deliveries.map((d: any) => d.event_type).sort()).to.deep.equal([
      'vpn.connected',
      'vpn.disconnected',
    ]);
  });

  it('delivers vpn.server.created and vpn.server.deleted to every subscribed organization', async () => {
    const a = await createOrg(s.deps);
    const b = await createOrg(s.deps);
    const whA = await webhook(a, ['vpn.server.created', 'vpn.server.deleted']);
    const whB = await webhook(b, ['vpn.server.created']);
    const out: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(l) };
    const code = await runCli(
      [
        'servers:add',
        '--location',
        'ca-central',
        '--city',
        'Toronto',
        '--country',
        'Canada',
        '--country-code',
        'CA',
        '--protocols',
        'wireguard',
        '--host',
        `yyz-${Date.now().toString(36)}.vpn.example.net`,
        '--json',
      ],
      { db: s.deps.db, io },
    );
    expect(code, out.join('\n')).to.equal(0);
    const server = JSON.parse(out.join('\n'));
    const created = await rx.waitFor(
      (r) => r.filter((q) => q.body?.data?.object?.id === server.id).length >= 2,
    );
    const forServer = created.filter((q) => q.body.data.object.id === server.id);
    expect(forServer.map((q) => q.body.organization_id).sort()).to.deep.equal(
      [a.organizationId, b.organizationId].sort(),
    );
    for (const q of forServer) {
      expect(q.body.type).to.equal('vpn.server.created');
      expect(q.body.data.object).to.deep.equal(server);
      const secret = q.body.organization_id === a.organizationId ? whA.secret : whB.secret;
      expect(await verifyWithThirdPartyLibraries(secret, q)).to.equal(true);
    }

    expect(await runCli(['servers:remove', server.id], { db: s.deps.db, io })).to.equal(0);
    const deleted = await rx.waitFor((r) =>
      r.some((q) => q.body?.type === 'vpn.server.deleted' && q.body.data.object.id === server.id),
    );
    const del = deleted.filter(
      (q) => q.body.type === 'vpn.server.deleted' && q.body.data.object.id === server.id,
    );
    // Only A subscribed to deletions.
    expect(del.map((q) => q.body.organization_id)).to.deep.equal([a.organizationId]);
  });
});
