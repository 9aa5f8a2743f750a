// Test tier: server
import { expect } from 'chai';
import { verify as verifyGithubStyle } from '@octokit/webhooks-methods';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { recordEvent } from '../../../server/events/record-event.js';
import { newId } from '../../../server/lib/ids.js';
import { MemoryMailDriver } from '../../../server/mail/mail-driver.js';
import { WebhookDelivery } from '../../../server/modules/webhooks/webhook-delivery.entity.js';
import { Webhook } from '../../../server/modules/webhooks/webhook.entity.js';
import { dropExpiredSecretsJob, purgeDeliveriesJob } from '../../../server/modules/webhooks/webhooks.jobs.js';
import { openWebhookSecret } from '../../../server/modules/webhooks/webhook-secrets.js';
import { testConfig } from '../../support/env.js';
import { looseEvent } from '../../support/events.js';
import { FakeClock } from '../../support/fake-clock.js';
import { createOrg, createUser, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, startTestServer, type TestServer } from '../../support/server.js';
import { ownPostgresDatabase } from '../../support/scratch-database.js';
import { waitFor } from '../../support/wait.js';
import {
  startReceiver,
  verifyWithThirdPartyLibraries,
  type ReceivedRequest,
  type Receiver,
} from './receiver.js';
import { createWebhook } from './webhook-helpers.js';

const DAY = 86_400_000;

/** Commits one event the way every module does: in the transaction of its change. */
async function emit(s: TestServer, owner: TestUser, object: Record<string, unknown>, at = new Date()) {
  await s.deps.db.orm.em.fork().transactional(async (em) => {
    recordEvent(em, looseEvent('user.updated'), object, owner.organizationId, at);
  });
}

async function deliveries(s: TestServer, owner: TestUser, webhookId: string, query = ''): Promise<any[]> {
  const res = await http(s.baseUrl, 'GET', `/v1/webhooks/${webhookId}/deliveries?limit=100${query}`, {
    token: owner.token,
  });
  expect(res.status, res.text).to.equal(200);
  return res.body.deliveries;
}

/**
 * What a receiver holding one secret at a time does during a rotation: GitHub-style, `X-VPN-Signature` or else
 * `X-VPN-Signature-Previous`; Standard Webhooks, any signature of `webhook-signature`. Both must accept.
 */
async function receiverAccepts(secret: string, req: ReceivedRequest): Promise<boolean> {
  const payload = req.raw.toString('utf8');
  const github =
    (await verifyGithubStyle(secret, payload, String(req.headers['x-vpn-signature'] ?? ''))) ||
    (typeof req.headers['x-vpn-signature-previous'] === 'string' &&
      (await verifyGithubStyle(secret, payload, req.headers['x-vpn-signature-previous'])));
  if (!github) return false;
  try {
    new StandardWebhook(secret).verify(payload, {
      'webhook-id': String(req.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
    });
    return true;
  } catch {
    return false;
  }
}

describe('webhooks for operators', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  describe('recover and redeliver', () => {
    let rx: Receiver;
    afterEach(async () => {
      await rx?.close();
    });

    it('after an outage, recover re-sends exactly the failed deliveries, once each, with their event ids', async () => {
      const owner = await createOrg(s.deps);
      rx = await startReceiver();
      const port = Number(new URL(rx.url).port);
      const wh = await createWebhook(s, owner, rx.url, ['user.updated']);

      await emit(s, owner, { phase: 'before', n: 0 });
      await emit(s, owner, { phase: 'before', n: 1 });
      await rx.waitFor((r) => r.length >= 2);

      // The receiver goes down: every attempt (3 with the tests' schedule) is refused.
      await rx.close();
      const outageStart = new Date(Date.now() - 1);
      for (let n = 0; n < 4; n++) await emit(s, owner, { phase: 'outage', n });
      const failed = await waitFor('the outage deliveries failed', async () => {
        const d = await deliveries(s, owner, wh.id, '&status=failed');
        return d.length === 4 ? d : undefined;
      });
      expect(failed.every((d) => d.attempts === 3 && d.response_status === null)).to.equal(true);

      // It comes back on the same address; new events flow again.
      rx = await startReceiver('/hook', port);
      await emit(s, owner, { phase: 'after', n: 0 });
      await rx.waitFor((r) => r.length >= 1);

      const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/recover`, {
        token: owner.token,
        body: { since: outageStart.toISOString() },
      });
      expect(res.status, res.text).to.equal(202);
      expect(res.body).to.deep.equal({ success: true, deliveries_queued: 4 });

      await rx.waitFor((r) => r.length >= 5);
      await waitFor('the recovered deliveries succeeded', async () => {
        const d = await deliveries(s, owner, wh.id, '&status=success');
        return d.filter((x) => x.redelivery_of).length === 4 ? d : undefined;
      });
      const resent = rx.requests.filter((r) => r.body.data.object.phase === 'outage');
      expect(resent.map((r) => r.body.id).sort()).to.deep.equal(failed.map((d) => d.event_id).sort());
      for (const r of rx.requests) {
        expect(await verifyWithThirdPartyLibraries(wh.secret, r)).to.equal(true);
        expect(r.headers['webhook-id']).to.equal(r.body.id);
      }
      // The same bytes as the original delivery's body.
      for (const r of resent) {
        const original = failed.find((d) => d.event_id === r.body.id);
        expect(r.body).to.deep.equal(original.event_data);
      }

      // The originals stay failed; a second recover of the same window finds nothing new.
      expect(await deliveries(s, owner, wh.id, '&status=failed')).to.have.length(4);
      const again = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/recover`, {
        token: owner.token,
        body: { since: outageStart.toISOString() },
      });
      expect(again.status).to.equal(202);
      expect(again.body.deliveries_queued).to.equal(0);
      await new Promise((r) => setTimeout(r, 300));
      expect(rx.requests).to.have.length(5);
    });

    it('recover queues only what failed since the last recovery, within the window', async () => {
      const owner = await createOrg(s.deps);
      rx = await startReceiver();
      rx.respond(() => ({ status: 503 }));
      const wh = await createWebhook(s, owner, rx.url, ['user.updated']);
      const start = new Date(Date.now() - 1);
      await emit(s, owner, { n: 1 });
      await waitFor('one failed delivery', async () =>
        (await deliveries(s, owner, wh.id, '&status=failed')).length === 1 ? true : undefined,
      );
      const first = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/recover`, {
        token: owner.token,
        body: { since: start.toISOString(), until: new Date().toISOString() },
      });
      expect(first.body.deliveries_queued).to.equal(1);
      // The recovered delivery fails too (still 503), and so does a new event.
      await emit(s, owner, { n: 2 });
      await waitFor('three failed deliveries', async () =>
        (await deliveries(s, owner, wh.id, '&status=failed')).length === 3 ? true : undefined,
      );
      const second = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/recover`, {
        token: owner.token,
        body: { since: start.toISOString() },
      });
      expect(second.body.deliveries_queued).to.equal(2);
      const third = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/recover`, {
        token: owner.token,
        body: { since: start.toISOString() },
      });
      expect(third.body.deliveries_queued).to.equal(0);
    });

    it('redeliver sends the same event again as a new delivery, retried like any other', async () => {
      const owner = await createOrg(s.deps);
      rx = await startReceiver();
      const wh = await createWebhook(s, owner, rx.url, ['user.updated']);
      await emit(s, owner, { hello: 'again' });
      const [first] = await rx.waitFor((r) => r.length >= 1);
      const original = await waitFor('the delivery to succeed', async () => {
        const [d] = await deliveries(s, owner, wh.id);
        return d?.status === 'success' ? d : undefined;
      });

      rx.respond((_req, i) => (i === 1 ? { status: 500 } : { status: 200 }));
      const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/deliveries/${original.id}/redeliver`, {
        token: owner.token,
      });
      expect(res.status, res.text).to.equal(202);
      const d = res.body.delivery;
      expect(d.id).to.match(/^del_/).and.not.equal(original.id);
      expect(d).to.include({
        webhook_id: wh.id,
        event_id: original.event_id,
        status: 'pending',
        attempts: 0,
        redelivery_of: original.id,
      });
      // First attempt answered 500, the retry 200.
      const reqs = await rx.waitFor((r) => r.length >= 3);
      for (const r of reqs.slice(1)) {
        expect(r.raw.equals(first!.raw)).to.equal(true);
        expect(r.headers['webhook-id']).to.equal(original.event_id);
        expect(r.headers['x-vpn-delivery']).to.equal(d.id);
        expect(await verifyWithThirdPartyLibraries(wh.secret, r)).to.equal(true);
      }
      await waitFor('the redelivery to succeed', async () => {
        const x = (await deliveries(s, owner, wh.id)).find((y) => y.id === d.id);
        return x?.status === 'success' && x.attempts === 2 ? x : undefined;
      });
    });

    it('refuses bad input, other organizations and inactive webhooks, and changes nothing', async () => {
      const owner = await createOrg(s.deps);
      const stranger = await createOrg(s.deps);
      rx = await startReceiver();
      const wh = await createWebhook(s, owner, rx.url, ['user.updated']);
      const theirs = await createWebhook(s, stranger, rx.url, ['user.updated']);
      await emit(s, stranger, { theirs: true });
      const [their] = await waitFor('a delivery of theirs', async () => {
        const d = await deliveries(s, stranger, theirs.id);
        return d.length ? d : undefined;
      });
      const post = (path: string, body?: unknown, token = owner.token) =>
        http(s.baseUrl, 'POST', path, { token, body });

      const old = new Date(Date.now() - 31 * DAY).toISOString();
      const bad: [string, unknown][] = [
        [`/v1/webhooks/${wh.id}/recover`, { since: old }],
        [`/v1/webhooks/${wh.id}/recover`, { since: new Date().toISOString(), until: old }],
        [`/v1/webhooks/${wh.id}/recover`, { since: 'yesterday' }],
        [`/v1/webhooks/${wh.id}/recover`, {}],
        [`/v1/webhooks/${wh.id}/recover`, { since: new Date().toISOString(), extra: 1 }],
        [`/v1/webhooks/${wh.id}/rotate-secret`, { expires_in_hours: 1.5 }],
        [`/v1/webhooks/${wh.id}/rotate-secret`, { expires_in_hours: 169 }],
        [`/v1/webhooks/${wh.id}/rotate-secret`, { expires_in_hours: -1 }],
      ];
      for (const [path, body] of bad) {
        const res = await post(path, body);
        expect(res.status, `${path} ${JSON.stringify(body)}: ${res.text}`).to.equal(400);
        expect(res.body.error.code).to.equal('VALIDATION_ERROR');
      }
      for (const path of [
        `/v1/webhooks/${theirs.id}/recover`,
        `/v1/webhooks/${wh.id}/deliveries/${their.id}/redeliver`,
        `/v1/webhooks/${theirs.id}/deliveries/${their.id}/redeliver`,
        `/v1/webhooks/${wh.id}/deliveries/del_unknown/redeliver`,
        `/v1/webhooks/${theirs.id}/rotate-secret`,
      ]) {
        const body = path.endsWith('recover') ? { since: new Date().toISOString() } : undefined;
        const res = await post(path, body);
        expect(res.status, path).to.equal(404);
      }
      const paused = await http(s.baseUrl, 'PUT', `/v1/webhooks/${wh.id}`, {
        token: owner.token,
        body: { active: false },
      });
      expect(paused.status).to.equal(200);
      const refused = await post(`/v1/webhooks/${wh.id}/recover`, { since: new Date().toISOString() });
      expect(refused.status).to.equal(409);
      expect(refused.body.error.code).to.equal('CONFLICT');

      // Nothing was queued, and the secret of theirs did not change.
      expect(await deliveries(s, owner, wh.id)).to.have.length(0);
      expect(await deliveries(s, stranger, theirs.id)).to.have.length(1);
      const hook = await s.deps.db.orm.em.fork().findOneOrFail(Webhook, theirs.id);
      expect(openWebhookSecret(s.deps, hook.secret)).to.equal(theirs.secret);
    });
  });
});

/**
 * On a server alone on its database: the pool limit and the signing of attempts claimed just before a rotation are
 * per process, so no other server may claim these deliveries.
 */
describe('webhooks for operators, on a server of their own', () => {
  let s: TestServer;
  let db: Awaited<ReturnType<typeof ownPostgresDatabase>>;
  let rx: Receiver;
  before(async () => {
    db = await ownPostgresDatabase('webhooks_fair');
    s = await startTestServer({ config: testConfig(db ? { DATABASE_URL: db.url } : {}) });
  });
  after(async () => {
    await rx?.close();
    await s?.close();
    await db?.drop();
  });

  it('a large recovery to a slow receiver holds part of the pool only, and other webhooks go first', async () => {
    const owner = await createOrg(s.deps);
    const other = await createOrg(s.deps);
    rx = await startReceiver();
    const fast = await startReceiver();
    try {
      // The recovering receiver takes 1 s per request; count how many it serves at once.
      let open = 0;
      let most = 0;
      rx.respond(() => {
        open++;
        most = Math.max(most, open);
        setTimeout(() => open--, 1000);
        return { status: 200, delayMs: 1000 };
      });
      const slow = await createWebhook(s, owner, rx.url, ['user.updated']);
      await createWebhook(s, other, fast.url, ['user.updated']);
      const em = s.deps.db.orm.em.fork();
      const at = new Date(Date.now() - 60_000);
      const FAILED = 120;
      for (let i = 0; i < FAILED; i++) {
        const eventId = newId('evt');
        em.create(WebhookDelivery, {
          id: newId('del'),
          webhook: em.getReference(Webhook, slow.id),
          organizationId: owner.organizationId,
          eventId,
          eventType: 'user.updated',
          payload: JSON.stringify({ id: eventId, type: 'user.updated', data: { object: { i } } }),
          status: 'failed',
          attempts: 3,
          fairAt: at,
          createdAt: at,
          updatedAt: at,
        });
      }
      await em.flush();
      const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${slow.id}/recover`, {
        token: owner.token,
        body: { since: new Date(at.getTime() - 1000).toISOString() },
      });
      expect(res.body.deliveries_queued).to.equal(FAILED);
      await rx.waitFor((r) => r.length >= 10);

      // Another webhook's event is delivered while the recovery's backlog still waits.
      await emit(s, other, { fresh: true });
      await fast.waitFor((r) => r.length >= 1);
      expect(rx.requests.length).to.be.lessThan(FAILED);

      await rx.waitFor((r) => r.length >= FAILED, 30_000);
      // Three quarters of the default pool of 64 attempts in flight.
      expect(most).to.be.at.most(48);
      expect(new Set(rx.requests.map((r) => r.body.id)).size).to.equal(FAILED);
      await waitFor('every failed delivery to be recovered', async () => {
        const n = await s.deps.db.orm.em
          .fork()
          .count(WebhookDelivery, { webhook: slow.id, status: 'success' });
        return n === FAILED ? n : undefined;
      });
    } finally {
      await fast.close();
    }
  });

  describe('rotate-secret', () => {
    let rx: Receiver;
    afterEach(async () => {
      await rx?.close();
    });

    it('lets a receiver switch secrets at any moment while events flow: no delivery fails verification', async () => {
      const owner = await createOrg(s.deps);
      rx = await startReceiver();
      const wh = await createWebhook(s, owner, rx.url, ['user.updated']);
      let held = wh.secret;
      const rejected: string[] = [];
      const checks: Promise<void>[] = [];
      // The receiver checks each request, as it arrives, with the one secret it holds at that moment.
      rx.respond((req) => {
        const secret = held;
        checks.push(
          receiverAccepts(secret, req).then((ok) => {
            if (!ok) rejected.push(`${String(req.body?.id)} with ${secret === wh.secret ? 'old' : 'new'}`);
          }),
        );
        return { status: 200 };
      });

      const EVENTS = 60;
      let rotated: { secret: string } | undefined;
      {
        for (let n = 0; n < EVENTS; n++) {
          await emit(s, owner, { n });
          if (n === 20) {
            const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/rotate-secret`, {
              token: owner.token,
              body: {},
            });
            expect(res.status, res.text).to.equal(200);
            expect(res.body.secret)
              .to.match(/^whsec_[A-Za-z0-9+/]{43}=$/)
              .and.not.equal(wh.secret);
            expect(res.body.webhook.secret).to.equal(`whsec_****${res.body.secret.slice(-4)}`);
            expect(res.text).to.not.include(wh.secret);
            rotated = { secret: res.body.secret };
            const switchAfter = Math.floor(Math.random() * 150);
            setTimeout(() => (held = res.body.secret), switchAfter);
          }
          await new Promise((r) => setTimeout(r, 5));
        }
        await rx.waitFor((r) => new Set(r.map((x) => x.body.id)).size >= EVENTS, 30_000);
      }
      await Promise.all(checks);
      expect(rejected).to.deep.equal([]);
      expect(held).to.equal(rotated!.secret);
      const overlapping = rx.requests.filter((r) => r.headers['x-vpn-signature-previous']);
      expect(overlapping.length).to.be.greaterThan(0);
      for (const r of overlapping) {
        expect(String(r.headers['webhook-signature']).split(' ')).to.have.length(2);
        // Either secret alone verifies.
        expect(await receiverAccepts(wh.secret, r)).to.equal(true);
        expect(await receiverAccepts(rotated!.secret, r)).to.equal(true);
      }

      // The webhook shows the overlap, never the previous secret.
      const got = await http(s.baseUrl, 'GET', `/v1/webhooks/${wh.id}`, { token: owner.token });
      expect(got.body.webhook.previous_secret_expires_at).to.be.a('string');
      expect(got.text).to.not.include(wh.secret).and.not.include(rotated!.secret);
      const expires = new Date(got.body.webhook.previous_secret_expires_at).getTime();
      expect(Math.abs(expires - (Date.now() + 24 * 3_600_000))).to.be.lessThan(60_000);

      // A further rotation keeps one previous secret at most: the first one no longer verifies.
      const third = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/rotate-secret`, {
        token: owner.token,
        body: { expires_in_hours: 2 },
      });
      expect(third.status).to.equal(200);
      const before = rx.requests.length;
      await emit(s, owner, { n: 'third' });
      const [req] = (await rx.waitFor((r) => r.length > before)).slice(before);
      expect(String(req!.headers['webhook-signature']).split(' ')).to.have.length(2);
      expect(await receiverAccepts(third.body.secret, req!)).to.equal(true);
      expect(await receiverAccepts(rotated!.secret, req!)).to.equal(true);
      expect(await receiverAccepts(wh.secret, req!)).to.equal(false);

      // expires_in_hours: 0 drops the old secret at once.
      const fourth = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/rotate-secret`, {
        token: owner.token,
        body: { expires_in_hours: 0 },
      });
      expect(fourth.status).to.equal(200);
      expect(fourth.body.webhook.previous_secret_expires_at).to.equal(null);
      const n = rx.requests.length;
      await emit(s, owner, { n: 'fourth' });
      const [last] = (await rx.waitFor((r) => r.length > n)).slice(n);
      expect(last!.headers['x-vpn-signature-previous']).to.equal(undefined);
      expect(String(last!.headers['webhook-signature']).split(' ')).to.have.length(1);
      expect(await verifyWithThirdPartyLibraries(fourth.body.secret, last!)).to.equal(true);
      expect(await receiverAccepts(third.body.secret, last!)).to.equal(false);
    });
  });
});

/** On a clock that only moves when told: auto-disable after WEBHOOK_DISABLE_AFTER, retention, secret expiry. */
describe('webhooks for operators, with a fake clock', () => {
  let s: TestServer;
  let db: Awaited<ReturnType<typeof ownPostgresDatabase>>;
  let rx: Receiver;
  const clock = new FakeClock('2026-11-21T08:00:00.000Z');
  const mail = new MemoryMailDriver();
  before(async () => {
    // Its deliveries must be attempted on its own clock: no other server may claim them.
    db = await ownPostgresDatabase('webhooks_clock');
    s = await startTestServer({
      clock,
      mail,
      config: testConfig({ WEBHOOK_RETRY_SCHEDULE: '1h', ...(db ? { DATABASE_URL: db.url } : {}) }),
    });
  });
  after(async () => {
    await s?.close();
    await db?.drop();
  });
  beforeEach(async () => {
    rx = await startReceiver();
  });
  afterEach(async () => {
    await rx.close();
  });

  const nudge = () => s.deps.modules.webhooks.deliveryWorker.nudge();
  /** Moves the clock; access tokens live an hour, so `users` sign in again at the new time. */
  async function advance(ms: number, ...users: TestUser[]) {
    clock.advance(ms);
    for (const u of users) {
      const res = await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: u.email, password: u.password },
      });
      expect(res.status, res.text).to.equal(200);
      u.token = res.body.token;
    }
  }
  const hookRow = (id: string) => s.deps.db.orm.em.fork().findOneOrFail(Webhook, id);

  it('disables a webhook whose attempts all failed for WEBHOOK_DISABLE_AFTER (5d), and mails owner and admins', async () => {
    const owner = await createOrg(s.deps);
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const member = await createUser(s.deps, owner.organizationId, { role: 'member' });
    rx.respond(() => ({ status: 500 }));
    const wh = await createWebhook(s, owner, rx.url, ['user.updated']);
    const start = clock.now();

    await emit(s, owner, { n: 1 }, clock.now());
    await rx.waitFor((r) => r.length >= 1);
    await waitFor('a run of failures to start', async () =>
      (await hookRow(wh.id)).failingSince ? true : undefined,
    );
    expect((await hookRow(wh.id)).failingSince!.toISOString()).to.equal(start.toISOString());

    // Four days on, still failing: still active.
    await advance(4 * DAY, owner);
    await emit(s, owner, { n: 2 }, clock.now());
    nudge();
    await rx.waitFor((r) => r.length >= 3); // the first one's retry and the new event
    await new Promise((r) => setTimeout(r, 100));
    expect((await hookRow(wh.id)).status).to.equal('active');
    expect(mail.sent.filter((m) => m.kind === 'webhook_disabled')).to.have.length(0);

    // Past five days of failures: disabled, and the owner and the admin are told.
    await advance(DAY + 1000, owner);
    await emit(s, owner, { n: 3 }, clock.now());
    nudge();
    await waitFor('the webhook to be disabled', async () =>
      (await hookRow(wh.id)).status === 'disabled' ? true : undefined,
    );
    const mails = await waitFor('the webhook_disabled mails', async () => {
      const m = mail.sent.filter((x) => x.kind === 'webhook_disabled' && x.text.includes(wh.id));
      return m.length >= 2 ? m : undefined;
    });
    expect(mails.map((m) => m.to).sort()).to.deep.equal([owner.email, admin.email].sort());
    expect(mails.map((m) => m.to)).to.not.include(member.email);
    expect(mails[0]!.subject).to.include(rx.url);
    expect(mails[0]!.text).to.include('5 days').and.include(start.toISOString());

    const got = await http(s.baseUrl, 'GET', `/v1/webhooks/${wh.id}`, { token: owner.token });
    expect(got.body.webhook).to.include({ status: 'disabled', active: false });

    // Events meanwhile are not queued for it; PUT {active: true} enables it again with a fresh run.
    rx.respond(() => ({ status: 200 }));
    const seen = rx.requests.length;
    const put = await http(s.baseUrl, 'PUT', `/v1/webhooks/${wh.id}`, {
      token: owner.token,
      body: { active: true },
    });
    expect(put.status).to.equal(200);
    expect(put.body.webhook.status).to.equal('active');
    expect((await hookRow(wh.id)).failingSince).to.equal(null);
    await emit(s, owner, { n: 4 }, clock.now());
    nudge();
    const [ok] = (await rx.waitFor((r) => r.length > seen)).slice(seen);
    expect(ok!.body.data.object).to.deep.equal({ n: 4 });
    await waitFor('the delivery to succeed', async () => {
      const d = (await deliveries(s, owner, wh.id)).find((x) => x.event_id === ok!.body.id);
      return d?.status === 'success' ? d : undefined;
    });
  });

  it('a success ends a run of failures', async () => {
    const owner = await createOrg(s.deps);
    rx.respond((_r, i) => ({ status: i === 1 ? 200 : 500 }));
    const wh = await createWebhook(s, owner, rx.url, ['user.updated']);
    await emit(s, owner, { n: 1 }, clock.now());
    await waitFor('a run of failures to start', async () =>
      (await hookRow(wh.id)).failingSince ? true : undefined,
    );
    await advance(3 * DAY, owner);
    await emit(s, owner, { n: 2 }, clock.now());
    nudge();
    await rx.waitFor((r) => r.length >= 3);
    // The success is recorded before the next failure happens (a success recorded late ends only a run that began
    // before it).
    await waitFor('the success to be recorded', async () =>
      (await deliveries(s, owner, wh.id, '&status=success')).length === 1 ? true : undefined,
    );
    await advance(3 * DAY, owner);
    await emit(s, owner, { n: 3 }, clock.now());
    nudge();
    await rx.waitFor((r) => r.length >= 4);
    const t3 = clock.now().getTime() - 3 * DAY;
    await waitFor('a new run', async () => {
      const h = await hookRow(wh.id);
      return h.failingSince && h.failingSince.getTime() >= t3 ? h : undefined;
    });
    await new Promise((r) => setTimeout(r, 100));
    const h = await hookRow(wh.id);
    // Six days since the first failure, but a success in between: still active.
    expect(h.status).to.equal('active');
    expect(clock.now().getTime() - h.failingSince!.getTime()).to.be.lessThan(4 * DAY);
  });

  it('keeps deliveries 30 days: the purge job removes older ones and the stats count what is kept', async () => {
    const owner = await createOrg(s.deps);
    const wh = await createWebhook(s, owner, rx.url, ['user.updated']);
    await emit(s, owner, { age: 'old' }, clock.now());
    await waitFor('the old event to be delivered', async () => {
      const d = await deliveries(s, owner, wh.id, '&status=success');
      return d.length === 1 ? d : undefined;
    });
    await advance(20 * DAY, owner);
    await emit(s, owner, { age: 'recent' }, clock.now());
    nudge();
    await waitFor('the recent event to be delivered', async () => {
      const d = await deliveries(s, owner, wh.id, '&status=success');
      return d.length === 2 ? d : undefined;
    });
    const stats = async () =>
      (await http(s.baseUrl, 'GET', `/v1/webhooks/${wh.id}`, { token: owner.token })).body.webhook
        .delivery_stats;
    expect((await stats()).total_deliveries).to.equal(2);

    await advance(10 * DAY + 1000, owner); // the first is 30 days and a second old, the second 10 days
    await purgeDeliveriesJob.run(s.deps, {}, undefined as never);
    const kept = await deliveries(s, owner, wh.id);
    expect(kept.map((d) => d.event_data.data.object.age)).to.deep.equal(['recent']);
    expect(await stats()).to.include({ total_deliveries: 1, successful_deliveries: 1 });
    const list = await http(s.baseUrl, 'GET', '/v1/webhooks', { token: owner.token });
    expect(list.body.webhooks[0].delivery_stats).to.deep.equal({ successful: 1, failed: 0, last_30_days: 1 });
    const rows = await s.deps.db.orm.em.fork().count(WebhookDelivery, { webhook: wh.id });
    expect(rows).to.equal(1);
  });

  it('stops signing with the previous secret when it expires; the job then drops it', async () => {
    const owner = await createOrg(s.deps);
    const wh = await createWebhook(s, owner, rx.url, ['user.updated']);
    const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/rotate-secret`, {
      token: owner.token,
      body: { expires_in_hours: 1 },
    });
    expect(res.status).to.equal(200);
    expect(res.body.webhook.previous_secret_expires_at).to.equal(
      new Date(clock.now().getTime() + 3_600_000).toISOString(),
    );
    const test = () =>
      http(s.baseUrl, 'POST', `/v1/webhooks/${wh.id}/test`, { token: owner.token, body: {} });
    expect((await test()).status).to.equal(200);
    expect(rx.requests[0]!.headers['x-vpn-signature-previous']).to.be.a('string');
    expect(await receiverAccepts(wh.secret, rx.requests[0]!)).to.equal(true);

    await advance(3_600_000, owner);
    expect((await test()).status).to.equal(200);
    expect(rx.requests[1]!.headers['x-vpn-signature-previous']).to.equal(undefined);
    expect(await receiverAccepts(wh.secret, rx.requests[1]!)).to.equal(false);
    expect(await verifyWithThirdPartyLibraries(res.body.secret, rx.requests[1]!)).to.equal(true);

    const before = (await hookRow(wh.id)).previousSecret;
    expect(before && openWebhookSecret(s.deps, before)).to.equal(wh.secret);
    await dropExpiredSecretsJob.run(s.deps, {}, undefined as never);
    const h = await hookRow(wh.id);
    expect(h.previousSecret).to.equal(null);
    expect(h.previousSecretExpiresAt).to.equal(null);
    const got = await http(s.baseUrl, 'GET', `/v1/webhooks/${wh.id}`, { token: owner.token });
    expect(got.body.webhook.previous_secret_expires_at).to.equal(null);
  });
});
