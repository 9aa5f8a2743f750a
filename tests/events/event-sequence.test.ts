// Test tier: server
import { expect } from 'chai';
import { Event } from '../../server/events/event.entity.js';
import { recordEvent } from '../../server/events/record-event.js';
import { looseEvent } from '../support/events.js';
import { createOrg } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { startReceiver, type Receiver } from '../modules/webhooks/receiver.js';
import { createWebhook } from '../modules/webhooks/webhook-helpers.js';
import { billingEvents } from '../modules/billing/billing-helpers.js';

/**
 * Events are ordered by the sequence they were recorded in, not by their time (docs/adding-a-module.md, "Checklist",
 * step 5).
 */
describe('events: ordered by their sequence', () => {
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

  it('keeps the emission order of events recorded in one transaction at the same instant, over REST and in webhooks', async () => {
    const owner = await createOrg(s.deps);
    const hook = await createWebhook(s, owner, rx.url, ['user.updated']);
    const at = new Date('2026-03-01T12:00:00.000Z');
    const markers = ['first', 'second', 'third', 'fourth', 'fifth', 'sixth', 'seventh', 'eighth'];
    await s.deps.db.orm.em.fork().transactional(async (em) => {
      for (const marker of markers) {
        recordEvent(em, looseEvent('user.updated'), { marker }, owner.organizationId, at);
      }
    });

    // Stored: every event keeps its true time; the sequence follows the emission order.
    const rows = await s.deps.db.orm.em
      .fork()
      .find(
        Event,
        { organizationId: owner.organizationId, type: 'user.updated' },
        { orderBy: { seq: 'asc' } },
      );
    expect(rows.map((e) => (e.data.object as { marker: string }).marker)).to.deep.equal(markers);
    expect(new Set(rows.map((e) => e.createdAt.toISOString()))).to.deep.equal(new Set([at.toISOString()]));

    // Webhooks: every event delivered, with its true time.
    const received = await rx.waitFor((r) => r.length >= markers.length);
    expect(received.map((r) => r.body.created_at)).to.deep.equal(markers.map(() => at.toISOString()));
    expect(received.map((r) => r.body.data.object.marker).sort()).to.deep.equal([...markers].sort());

    // REST: the webhook's deliveries, newest first, are the events in reverse emission order, on every page.
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const res = await http(
        s.baseUrl,
        'GET',
        `/v1/webhooks/${hook.id}/deliveries?limit=3${after ? `&starting_after=${after}` : ''}`,
        { token: owner.token },
      );
      expect(res.status, res.text).to.equal(200);
      const page = res.body.deliveries as {
        id: string;
        event_data: { data: { object: { marker: string } } };
      }[];
      seen.push(...page.map((d) => d.event_data.data.object.marker));
      if (!res.body.has_more) break;
      after = page.at(-1)!.id;
    }
    expect(seen).to.deep.equal([...markers].reverse());
  });

  it('lists the events of a plan change as they were emitted, all at the time of the change', async () => {
    const owner = await createOrg(s.deps);
    const pm = await http(s.baseUrl, 'POST', '/v1/billing/payment-methods', {
      token: owner.token,
      body: { payment_method: 'pm_card_visa', set_as_default: true },
    });
    expect(pm.status, pm.text).to.be.oneOf([200, 201]);
    const before = (await billingEvents(s.deps, owner.organizationId)).length;
    const res = await http(s.baseUrl, 'PUT', '/v1/billing/subscription', {
      token: owner.token,
      body: { plan: 'pro' },
    });
    expect(res.status, res.text).to.equal(200);
    const em = s.deps.db.orm.em.fork();
    const rows = await em.find(
      Event,
      { organizationId: owner.organizationId, type: { $like: 'billing.%' } },
      { orderBy: { seq: 'asc' } },
    );
    const change = rows.slice(before);
    expect(change.map((e) => e.type)).to.deep.equal([
      'billing.invoice.created',
      'billing.invoice.paid',
      'billing.subscription.updated',
    ]);
    expect(new Set(change.map((e) => e.createdAt.getTime())).size).to.equal(1);
  });
});
