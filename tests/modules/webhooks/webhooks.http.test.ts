// Test tier: server
import { expect } from 'chai';
import { EVENT_TYPES } from '../../../server/events/event-types.js';
import { createOrg, createUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';

describe('webhooks over HTTP', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  const create = (token: string, body: Record<string, unknown>) =>
    http(s.baseUrl, 'POST', '/v1/webhooks', { token, body });

  it('creates a webhook: 201, Location, the whole secret once, then masked', async () => {
    const owner = await createOrg(s.deps);
    const res = await create(owner.token, {
      url: 'https://hooks.example.com/in',
      events: ['user.created', 'vpn.connected', 'user.created'],
      description: 'CRM sync',
    });
    expect(res.status).to.equal(201);
    const wh = res.body.webhook;
    expect(wh.id).to.match(/^wh_[a-z0-9]+$/);
    expect(res.headers.get('location')).to.match(new RegExp(`/v1/webhooks/${wh.id}$`));
    expect(wh).to.include({
      url: 'https://hooks.example.com/in',
      status: 'active',
      active: true,
      description: 'CRM sync',
      last_delivery: null,
    });
    expect(wh.events).to.deep.equal(['user.created', 'vpn.connected']);
    expect(wh.secret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(wh.secret.slice(6), 'base64')).to.have.length(32);
    expect(wh.delivery_stats).to.deep.equal({
      total_deliveries: 0,
      successful_deliveries: 0,
      failed_deliveries: 0,
      last_successful_delivery: null,
      last_failed_delivery: null,
      average_response_time_ms: null,
    });
    expect(wh.created_at).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const got = await http(s.baseUrl, 'GET', `/v1/webhooks/${wh.id}`, { token: owner.token });
    expect(got.status).to.equal(200);
    expect(got.body.webhook.secret).to.equal(`whsec_****${wh.secret.slice(-4)}`);
    expect(got.text).not.to.include(wh.secret);

    const list = await http(s.baseUrl, 'GET', '/v1/webhooks', { token: owner.token });
    expect(list.status).to.equal(200);
    expect(list.body.total).to.equal(1);
    expect(list.body.webhooks[0].id).to.equal(wh.id);
    expect(list.body.webhooks[0].secret).to.equal(`whsec_****${wh.secret.slice(-4)}`);
    expect(list.body.webhooks[0].delivery_stats).to.deep.equal({ successful: 0, failed: 0, last_30_days: 0 });
  });

  it('lists newest first, only the organization’s own', async () => {
    const owner = await createOrg(s.deps);
    const other = await createOrg(s.deps);
    const a = await create(owner.token, { url: 'https://a.example.com/', events: ['user.login'] });
    const b = await create(owner.token, { url: 'https://b.example.com/', events: ['user.login'] });
    await create(other.token, { url: 'https://c.example.com/', events: ['user.login'] });
    const list = await http(s.baseUrl, 'GET', '/v1/webhooks', { token: owner.token });
    expect(list.body.total).to.equal(2);
    expect(list.body.webhooks.map((w: { id: string }) => w.id)).to.deep.equal([
      b.body.webhook.id,
      a.body.webhook.id,
    ]);
  });

  it('updates only the fields sent; active false pauses, true resumes', async () => {
    const owner = await createOrg(s.deps);
    const { body } = await create(owner.token, { url: 'https://a.example.com/x', events: ['user.login'] });
    const id = body.webhook.id;
    const paused = await http(s.baseUrl, 'PUT', `/v1/webhooks/${id}`, {
      token: owner.token,
      body: { active: false, events: ['database.created', 'billing.invoice.paid'] },
    });
    expect(paused.status).to.equal(200);
    expect(paused.body.webhook).to.include({
      status: 'inactive',
      active: false,
      url: 'https://a.example.com/x',
    });
    expect(paused.body.webhook.events).to.deep.equal(['database.created', 'billing.invoice.paid']);
    expect(paused.body.webhook.secret).to.match(/^whsec_\*\*\*\*.{4}$/);
    const resumed = await http(s.baseUrl, 'PUT', `/v1/webhooks/${id}`, {
      token: owner.token,
      body: { active: true, description: null, url: 'https://b.example.com/y' },
    });
    expect(resumed.body.webhook).to.include({
      status: 'active',
      url: 'https://b.example.com/y',
      description: null,
    });
  });

  it('deletes: 200 with message and webhook_id, then 404', async () => {
    const owner = await createOrg(s.deps);
    const { body } = await create(owner.token, { url: 'https://a.example.com/', events: ['user.login'] });
    const id = body.webhook.id;
    const del = await http(s.baseUrl, 'DELETE', `/v1/webhooks/${id}`, { token: owner.token });
    expect(del.status).to.equal(200);
    expect(del.body).to.include({ success: true, webhook_id: id });
    expect(del.body.message).to.be.a('string');
    expect((await http(s.baseUrl, 'GET', `/v1/webhooks/${id}`, { token: owner.token })).status).to.equal(404);
    expect((await http(s.baseUrl, 'DELETE', `/v1/webhooks/${id}`, { token: owner.token })).status).to.equal(
      404,
    );
  });

  it('refuses unknown event names, empty events, unknown fields and missing url with 400', async () => {
    const owner = await createOrg(s.deps);
    const cases: Record<string, unknown>[] = [
      { url: 'https://a.example.com/', events: ['user.created', 'user.exploded'] },
      { url: 'https://a.example.com/', events: [] },
      { url: 'https://a.example.com/', events: ['webhook.test'] },
      { url: 'https://a.example.com/', events: ['user.login'], secret: 'whsec_mine' },
      { events: ['user.login'] },
      { url: 'not a url', events: ['user.login'] },
    ];
    for (const body of cases) {
      const res = await create(owner.token, body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.code).to.equal('VALIDATION_ERROR');
    }
    const list = await http(s.baseUrl, 'GET', '/v1/webhooks', { token: owner.token });
    expect(list.body.total).to.equal(0);
  });

  it('accepts every event name of the contract', async () => {
    const owner = await createOrg(s.deps);
    const res = await create(owner.token, { url: 'https://a.example.com/', events: [...EVENT_TYPES] });
    expect(res.status).to.equal(201);
    expect(res.body.webhook.events).to.have.length(EVENT_TYPES.length);
  });

  it('is owner/admin only: a member gets 403, even with every grant; an admin may', async () => {
    const owner = await createOrg(s.deps);
    const member = await createUser(s.deps, owner.organizationId, {
      role: 'member',
      permissions: ['users:admin', 'vpn:admin', 'database:admin', 'hosting:admin', 'billing:write'],
    });
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const { body } = await create(owner.token, { url: 'https://a.example.com/', events: ['user.login'] });
    const id = body.webhook.id;
    const calls: [string, string, unknown?][] = [
      ['GET', '/v1/webhooks'],
      ['POST', '/v1/webhooks', { url: 'https://b.example.com/', events: ['user.login'] }],
      ['GET', `/v1/webhooks/${id}`],
      ['PUT', `/v1/webhooks/${id}`, { active: false }],
      ['GET', `/v1/webhooks/${id}/deliveries`],
      ['POST', `/v1/webhooks/${id}/test`, {}],
      ['DELETE', `/v1/webhooks/${id}`],
    ];
    for (const [method, path, reqBody] of calls) {
      const res = await http(s.baseUrl, method, path, { token: member.token, body: reqBody });
      expect(res.status, `${method} ${path}`).to.equal(403);
      expect(res.body.error.code).to.equal('FORBIDDEN');
    }
    const asAdmin = await http(s.baseUrl, 'GET', `/v1/webhooks/${id}`, { token: admin.token });
    expect(asAdmin.status).to.equal(200);
    const unchanged = await http(s.baseUrl, 'GET', `/v1/webhooks/${id}`, { token: owner.token });
    expect(unchanged.body.webhook.status).to.equal('active');
  });

  it('answers 401 without a token and 404 for another organization’s webhook', async () => {
    const owner = await createOrg(s.deps);
    const stranger = await createOrg(s.deps);
    const { body } = await create(owner.token, { url: 'https://a.example.com/', events: ['user.login'] });
    const id = body.webhook.id;
    expect((await http(s.baseUrl, 'GET', '/v1/webhooks')).status).to.equal(401);
    for (const [method, path, reqBody] of [
      ['GET', `/v1/webhooks/${id}`],
      ['PUT', `/v1/webhooks/${id}`, { active: false }],
      ['GET', `/v1/webhooks/${id}/deliveries`],
      ['POST', `/v1/webhooks/${id}/test`, {}],
      ['DELETE', `/v1/webhooks/${id}`],
      ['GET', '/v1/webhooks/wh_doesnotexist'],
      ['GET', '/v1/webhooks/not-an-id'],
    ] as [string, string, unknown?][]) {
      const res = await http(s.baseUrl, method, path, { token: stranger.token, body: reqBody });
      expect(res.status, `${method} ${path}`).to.equal(404);
      expect(res.body.error.code).to.equal('NOT_FOUND');
    }
    const still = await http(s.baseUrl, 'GET', `/v1/webhooks/${id}`, { token: owner.token });
    expect(still.body.webhook.status).to.equal('active');
  });
});
