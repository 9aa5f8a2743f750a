// Test tier: server
import { expect } from 'chai';
import { looseEvent } from '../../support/events.js';
import { recordEvent } from '../../../server/events/record-event.js';
import { createOrg, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, startTestServer, type TestServer } from '../../support/server.js';
import { startReceiver, verifyWithThirdPartyLibraries, type Receiver } from './receiver.js';
import { createWebhook } from './webhook-helpers.js';
import { waitFor } from '../../support/wait.js';
import { WEBHOOK_LEASE_MARGIN_MS } from '../../../server/modules/webhooks/delivery-worker.js';

/** Polls the delivery list until `predicate` holds for the first (newest) delivery. */
async function waitForDelivery(
  s: TestServer,
  owner: TestUser,
  webhookId: string,
  predicate: (d: any) => boolean,
  timeoutMs = 15_000,
): Promise<any> {
  let d: any;
  return waitFor(
    () => `the delivery condition (newest delivery: ${JSON.stringify(d)})`,
    async () => {
      const res = await http(s.baseUrl, 'GET', `/v1/webhooks/${webhookId}/deliveries`, {
        token: owner.token,
      });
      d = res.body.deliveries?.[0];
      return d && predicate(d) ? d : undefined;
    },
    { timeoutMs },
  );
}

describe('webhook deliveries', () => {
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

  const webhook = (owner: TestUser, events: string[], url = rx.url) => createWebhook(s, owner, url, events);

  /** Commits one event the way every module does: in the transaction of its change. */
  async function emit(
    owner: TestUser,
    type: 'user.updated' | 'database.created',
    object: Record<string, unknown>,
  ) {
    await s.deps.db.orm.em.fork().transactional(async (em) => {
      recordEvent(em, looseEvent(type), object, owner.organizationId, new Date());
    });
  }

  it('delivers an emitted event (user.login) that third-party verifiers accept', async () => {
    const owner = await createOrg(s.deps);
    const wh = await webhook(owner, ['user.login']);
    const login = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email: owner.email, password: owner.password },
    });
    expect(login.status).to.equal(200);
    const [req] = await rx.waitFor((r) => r.length >= 1);
    expect(req!.method).to.equal('POST');
    expect(req!.path).to.equal('/hook');
    expect(req!.headers['content-type']).to.equal('application/json');
    expect(req!.headers['x-vpn-event']).to.equal('user.login');
    expect(req!.headers['x-vpn-delivery']).to.match(/^del_[a-z0-9]+$/);
    expect(req!.headers['x-vpn-signature']).to.match(/^sha256=[0-9a-f]{64}$/);
    expect(req!.headers['webhook-id']).to.equal(req!.body.id);
    expect(req!.headers['webhook-signature']).to.match(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(await verifyWithThirdPartyLibraries(wh.secret, req!)).to.equal(true);
    const wrongSecret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    expect(await verifyWithThirdPartyLibraries(wrongSecret, req!)).to.equal(false);

    const body = req!.body;
    expect(Object.keys(body)).to.deep.equal(['id', 'type', 'created_at', 'organization_id', 'data']);
    expect(body.id).to.match(/^evt_/);
    expect(body).to.include({ type: 'user.login', organization_id: owner.organizationId });
    expect(body.created_at).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(body.data.object).to.include({ id: owner.id, email: owner.email });

    const d = await waitForDelivery(s, owner, wh.id, (x) => x.status === 'success');
    expect(d).to.include({
      id: req!.headers['x-vpn-delivery'],
      webhook_id: wh.id,
      event_id: body.id,
      event_type: 'user.login',
      status: 'success',
      attempts: 1,
      response_status: 200,
      next_attempt_at: null,
      error: null,
    });
    expect(d.response_time_ms).to.be.a('number');
    expect(d.delivered_at).to.be.a('string');
    expect(d.event_data).to.deep.equal(body);
  });

  it('delivers the events of the users endpoints (user.created, user.updated, user.deleted)', async () => {
    const owner = await createOrg(s.deps);
    const wh = await webhook(owner, ['user.created', 'user.updated', 'user.deleted']);
    const created = await http(s.baseUrl, 'POST', '/v1/users', {
      token: owner.token,
      body: { email: `wired-${Date.now()}@example.test`, name: 'Wired', send_invitation: false },
    });
    expect(created.status).to.equal(201);
    const userId = created.body.user.id;
    const updated = await http(s.baseUrl, 'PUT', `/v1/users/${userId}`, {
      token: owner.token,
      body: { name: 'Rewired' },
    });
    expect(updated.status).to.equal(200);
    const deleted = await http(s.baseUrl, 'DELETE', `/v1/users/${userId}`, { token: owner.token });
    expect(deleted.status).to.equal(200);
    const reqs = await rx.waitFor((r) => r.length >= 3);
    const byType = new Map(reqs.map((r) => [r.body.type as string, r]));
    expect([...byType.keys()].sort()).to.deep.equal(['user.created', 'user.deleted', 'user.updated']);
    expect(byType.get('user.created')!.body.data.object).to.include({ id: userId, name: 'Wired' });
    expect(byType.get('user.updated')!.body.data.object).to.include({ id: userId, name: 'Rewired' });
    expect(byType.get('user.deleted')!.body.data.object).to.include({ id: userId });
    for (const r of reqs) expect(await verifyWithThirdPartyLibraries(wh.secret, r)).to.equal(true);
  });

  it('delivers only to active webhooks of the organization subscribed to the type', async () => {
    const owner = await createOrg(s.deps);
    const stranger = await createOrg(s.deps);
    const other = await startReceiver();
    try {
      const subscribed = await webhook(owner, ['database.created']);
      await webhook(owner, ['user.updated'], other.url); // other type
      const paused = await webhook(owner, ['database.created'], other.url);
      await http(s.baseUrl, 'PUT', `/v1/webhooks/${paused.id}`, {
        token: owner.token,
        body: { active: false },
      });
      await webhook(stranger, ['database.created'], other.url); // other organization
      await emit(owner, 'database.created', { id: 'db_1' });
      await emit(owner, 'database.created', { id: 'db_2' });
      await rx.waitFor((r) => r.length >= 2);
      await waitForDelivery(s, owner, subscribed.id, (x) => x.status === 'success');
      expect(rx.requests.map((r) => r.body.data.object.id).sort()).to.deep.equal(['db_1', 'db_2']);
      expect(other.requests).to.have.length(0);
    } finally {
      await other.close();
    }
  });

  it('retries a failing receiver on schedule with the same event and bytes, then marks it failed', async () => {
    // The test configuration's schedule is 200ms,400ms: three attempts.
    const owner = await createOrg(s.deps);
    rx.respond(() => ({ status: 500, body: 'boom' }));
    const wh = await webhook(owner, ['user.updated']);
    await emit(owner, 'user.updated', { id: 'usr_x', name: 'Ann' });
    await rx.waitFor((r) => r.length >= 3);
    const d = await waitForDelivery(s, owner, wh.id, (x) => x.status === 'failed');
    expect(d).to.include({ attempts: 3, response_status: 500, next_attempt_at: null, delivered_at: null });
    expect(d.error).to.equal('Receiver answered 500');
    expect(rx.requests).to.have.length(3);
    const [a, b, c] = rx.requests;
    for (const r of [b!, c!]) {
      expect(r.raw.equals(a!.raw)).to.equal(true);
      expect(r.headers['webhook-id']).to.equal(a!.headers['webhook-id']);
      expect(r.headers['x-vpn-delivery']).to.equal(a!.headers['x-vpn-delivery']);
      expect(await verifyWithThirdPartyLibraries(wh.secret, r)).to.equal(true);
    }
    expect(rx.requests.map((r) => r.headers['x-vpn-delivery-attempt'])).to.deep.equal(['1', '2', '3']);
    // Delays are at least the schedule minus the 10 % jitter.
    expect(b!.receivedAt - a!.receivedAt).to.be.at.least(180 - 5);
    expect(c!.receivedAt - b!.receivedAt).to.be.at.least(360 - 5);

    const detail = await http(s.baseUrl, 'GET', `/v1/webhooks/${wh.id}`, { token: owner.token });
    expect(detail.body.webhook.delivery_stats).to.include({
      total_deliveries: 1,
      successful_deliveries: 0,
      failed_deliveries: 1,
      last_successful_delivery: null,
    });
    expect(detail.body.webhook.delivery_stats.last_failed_delivery).to.equal(d.last_attempt_at);
  });

  it('records success after a failed first attempt', async () => {
    const owner = await createOrg(s.deps);
    rx.respond((_r, i) => (i === 0 ? { status: 503 } : { status: 204 }));
    const wh = await webhook(owner, ['user.updated']);
    await emit(owner, 'user.updated', { id: 'usr_y' });
    const d = await waitForDelivery(s, owner, wh.id, (x) => x.status === 'success');
    expect(d).to.include({ attempts: 2, response_status: 204, error: null });
  });

  it('disables the webhook when the receiver answers 410 Gone', async () => {
    const owner = await createOrg(s.deps);
    rx.respond(() => ({ status: 410 }));
    const wh = await webhook(owner, ['user.updated', 'database.created']);
    await emit(owner, 'user.updated', { id: 'usr_z' });
    const d = await waitForDelivery(s, owner, wh.id, (x) => x.status === 'failed');
    expect(d).to.include({ attempts: 1, response_status: 410 });
    const got = await http(s.baseUrl, 'GET', `/v1/webhooks/${wh.id}`, { token: owner.token });
    expect(got.body.webhook).to.include({ status: 'disabled', active: false });

    // A disabled webhook receives nothing more; a marker webhook shows the later event was relayed.
    const marker = await startReceiver();
    try {
      await webhook(owner, ['database.created'], marker.url);
      await emit(owner, 'database.created', { id: 'db_after' });
      await marker.waitFor((r) => r.length >= 1);
      expect(rx.requests).to.have.length(1);
      const list = await http(s.baseUrl, 'GET', `/v1/webhooks/${wh.id}/deliveries`, { token: owner.token });
      expect(list.body.total).to.equal(1);
    } finally {
      await marker.close();
    }

    // active: true re-enables it.
    const again = await http(s.baseUrl, 'PUT', `/v1/webhooks/${wh.id}`, {
      token: owner.token,
      body: { active: true },
    });
    expect(again.body.webhook.status).to.equal('active');
  });

  it('does not follow a redirect (to a private address or anywhere)', async () => {
    const owner = await createOrg(s.deps);
    const internal = await startReceiver('/internal');
    try {
      rx.respond(() => ({
        status: 302,
        headers: { location: internal.url.replace('127.0.0.1', '10.0.0.1') },
      }));
      const wh = await webhook(owner, ['user.updated']);
      const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/test`, {
        token: owner.token,
        body: {},
      });
      expect(res.status).to.equal(200);
      expect(res.body.delivery).to.include({ status: 'failed', response_status: 302, attempts: 1 });
      rx.respond(() => ({ status: 307, headers: { location: internal.url } }));
      const res2 = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/test`, {
        token: owner.token,
        body: {},
      });
      expect(res2.body.delivery).to.include({ status: 'failed', response_status: 307 });
      expect(rx.requests).to.have.length(2);
      expect(internal.requests).to.have.length(0);
    } finally {
      await internal.close();
    }
  });

  it('POST /webhooks/:id/test delivers now, whatever the subscriptions and state, and returns the outcome', async () => {
    const owner = await createOrg(s.deps);
    const wh = await webhook(owner, ['billing.invoice.paid']);
    await http(s.baseUrl, 'PUT', `/v1/webhooks/${wh.id}`, { token: owner.token, body: { active: false } });
    const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/test`, {
      token: owner.token,
      body: { custom_data: { order: 42, tags: ['a'] } },
    });
    expect(res.status).to.equal(200);
    const d = res.body.delivery;
    expect(d).to.include({ webhook_id: wh.id, event_type: 'webhook.test', status: 'success', attempts: 1 });
    expect(d.response_status).to.equal(200);
    expect(rx.requests).to.have.length(1);
    const req = rx.requests[0]!;
    expect(await verifyWithThirdPartyLibraries(wh.secret, req)).to.equal(true);
    expect(req.body).to.deep.equal(d.event_data);
    expect(req.body).to.include({
      type: 'webhook.test',
      organization_id: owner.organizationId,
      id: d.event_id,
    });
    expect(req.body.data).to.deep.equal({ object: { order: 42, tags: ['a'] } });

    const typed = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/test`, {
      token: owner.token,
      body: { event_type: 'vpn.connected' },
    });
    expect(typed.body.delivery.event_type).to.equal('vpn.connected');
    expect(rx.requests[1]!.headers['x-vpn-event']).to.equal('vpn.connected');
    expect(rx.requests[1]!.body.data).to.deep.equal({ object: {} });
    // A test delivery is marked, in the signed body and in a header, so a receiver cannot take a test of a
    // sensitive type (`billing.invoice.paid`) for the real event.
    const forged = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/test`, {
      token: owner.token,
      body: { event_type: 'billing.invoice.paid', custom_data: { id: 'in_x', status: 'paid' } },
    });
    expect(forged.status).to.equal(200);
    for (const r of rx.requests) {
      expect(r.body.test).to.equal(true);
      expect(r.headers['x-vpn-test']).to.equal('true');
    }
    expect(await verifyWithThirdPartyLibraries(wh.secret, rx.requests[2]!)).to.equal(true);
    expect(forged.body.delivery.event_data.test).to.equal(true);

    const bad = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/test`, {
      token: owner.token,
      body: { event_type: 'user.exploded' },
    });
    expect(bad.status).to.equal(400);
    expect(rx.requests).to.have.length(3);
  });

  it('reports a failed test delivery without retrying it, and reads a capped response body', async () => {
    const owner = await createOrg(s.deps);
    const wh = await webhook(owner, ['user.login']);
    rx.respond(() => ({ status: 500, body: 'x'.repeat(2 * 1024 * 1024) }));
    const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/test`, { token: owner.token, body: {} });
    expect(res.body.delivery).to.include({ status: 'failed', response_status: 500, next_attempt_at: null });
    rx.respond(() => ({ status: 200, body: 'y'.repeat(2 * 1024 * 1024) }));
    const ok = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/test`, { token: owner.token, body: {} });
    expect(ok.body.delivery.status).to.equal('success');
  });

  it('lists deliveries newest first with cursor paging and status / event_type filters; stats follow', async () => {
    const owner = await createOrg(s.deps);
    const wh = await webhook(owner, ['user.login']);
    const sent: { id: string; status: string; type: string }[] = [];
    const plan: [string, number][] = [
      ['webhook.test', 200],
      ['user.created', 500],
      ['user.created', 200],
      ['webhook.test', 500],
      ['database.deleted', 200],
    ];
    for (const [type, status] of plan) {
      rx.respond(() => ({ status }));
      const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/test`, {
        token: owner.token,
        body: { event_type: type },
      });
      sent.push({ id: res.body.delivery.id, status: res.body.delivery.status, type });
    }
    const newestFirst = sent.map((x) => x.id).reverse();
    const path = `/v1/webhooks/${wh.id}/deliveries`;
    const p1 = await http(s.baseUrl, 'GET', `${path}?limit=2`, { token: owner.token });
    expect(p1.status).to.equal(200);
    expect(p1.body).to.include({ success: true, total: 5, has_more: true });
    expect(p1.body.deliveries.map((d: any) => d.id)).to.deep.equal(newestFirst.slice(0, 2));
    const p2 = await http(s.baseUrl, 'GET', `${path}?limit=2&starting_after=${newestFirst[1]}`, {
      token: owner.token,
    });
    expect(p2.body.deliveries.map((d: any) => d.id)).to.deep.equal(newestFirst.slice(2, 4));
    const p3 = await http(s.baseUrl, 'GET', `${path}?limit=2&starting_after=${newestFirst[3]}`, {
      token: owner.token,
    });
    expect(p3.body).to.include({ has_more: false });
    expect(p3.body.deliveries.map((d: any) => d.id)).to.deep.equal(newestFirst.slice(4));

    const failed = await http(s.baseUrl, 'GET', `${path}?status=failed`, { token: owner.token });
    expect(failed.body.total).to.equal(2);
    expect(failed.body.deliveries.every((d: any) => d.status === 'failed')).to.equal(true);
    const created = await http(s.baseUrl, 'GET', `${path}?event_type=user.created`, { token: owner.token });
    expect(created.body.deliveries.map((d: any) => d.id)).to.deep.equal(
      sent
        .filter((x) => x.type === 'user.created')
        .map((x) => x.id)
        .reverse(),
    );
    const both = await http(s.baseUrl, 'GET', `${path}?event_type=webhook.test&status=success`, {
      token: owner.token,
    });
    expect(both.body.deliveries.map((d: any) => d.id)).to.deep.equal([sent[0]!.id]);

    for (const q of [
      'status=done',
      'event_type=user.exploded',
      'limit=0',
      'limit=101',
      'starting_after=del_unknown',
    ]) {
      const res = await http(s.baseUrl, 'GET', `${path}?${q}`, { token: owner.token });
      expect(res.status, q).to.equal(400);
    }

    const list = await http(s.baseUrl, 'GET', '/v1/webhooks', { token: owner.token });
    expect(list.body.webhooks[0].delivery_stats).to.deep.equal({ successful: 3, failed: 2, last_30_days: 5 });
    expect(list.body.webhooks[0].last_delivery).to.be.a('string');
    const detail = await http(s.baseUrl, 'GET', `/v1/webhooks/${wh.id}`, { token: owner.token });
    const stats = detail.body.webhook.delivery_stats;
    expect(stats).to.include({ total_deliveries: 5, successful_deliveries: 3, failed_deliveries: 2 });
    expect(stats.average_response_time_ms).to.be.a('number');
    expect(stats.last_successful_delivery).to.be.a('string');
    expect(stats.last_failed_delivery).to.be.a('string');
  });
});

describe('webhook deliveries: timeout', () => {
  let s: TestServer;
  let rx: Receiver;
  before(async () => {
    s = await startTestServer({ env: { WEBHOOK_TIMEOUT_MS: '300' } });
    rx = await startReceiver();
  });
  after(async () => {
    await rx.close();
    await s.close();
  });

  it('counts an answer later than WEBHOOK_TIMEOUT_MS as a failure', async () => {
    const owner = await createOrg(s.deps);
    rx.respond(() => ({ status: 200, delayMs: 2000 }));
    const created = await http(s.baseUrl, 'POST', '/v1/webhooks', {
      token: owner.token,
      body: { url: rx.url, events: ['user.login'] },
    });
    const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${created.body.webhook.id}/test`, {
      token: owner.token,
      body: {},
    });
    expect(res.body.delivery).to.include({
      status: 'failed',
      response_status: null,
      error: 'Timed out after 300 ms',
    });
  });

  it('claims an attempt for WEBHOOK_TIMEOUT_MS + 15 s: due again that soon if its process dies mid-attempt', async () => {
    const owner = await createOrg(s.deps);
    rx.respond(() => ({ status: 200, delayMs: 2000 }));
    const hook = await createWebhook(s, owner, rx.url, ['user.updated']);
    await s.deps.db.orm.em.fork().transactional(async (em) => {
      recordEvent(em, looseEvent('user.updated'), { id: 'usr_lease' }, owner.organizationId, new Date());
    });
    // A claim leaves `updated_at` past `last_attempt_at` (an outcome sets both alike); a look that misses the first
    // attempt's claim (300 ms) sees the retry's, 5 s later.
    const claim = await waitFor(
      'a claim of the delivery',
      async () => {
        const [row] = await s.deps.db.orm.em.fork().execute<{ next_attempt_at: Date; updated_at: Date }[]>(
          `select next_attempt_at, updated_at from webhook_deliveries
            where webhook_id = ? and status = 'pending' and attempts > 0
              and (last_attempt_at is null or last_attempt_at < updated_at)`,
          [hook.id],
        );
        return row;
      },
      { timeoutMs: 20_000 },
    );
    // On PostgreSQL the run's shared server (default WEBHOOK_TIMEOUT_MS) works on the same database and may claim
    // the attempt first: its lease follows the same rule with its own timeout.
    const timeouts = [s.deps.config.webhook.timeoutMs];
    if (process.env.DATABASE_URL) timeouts.push((await sharedServer()).deps.config.webhook.timeoutMs);
    const lease = new Date(claim.next_attempt_at).getTime() - new Date(claim.updated_at).getTime();
    expect(timeouts.map((t) => t + WEBHOOK_LEASE_MARGIN_MS)).to.include(lease);
    expect(s.deps.config.webhook.timeoutMs).to.equal(300);
    expect(WEBHOOK_LEASE_MARGIN_MS).to.equal(15_000);
  });
});
