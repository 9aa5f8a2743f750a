// Test tier: server
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { AppDeps } from '../../../server/kit/deps.js';
import type { UsageReporter } from '../../../server/kit/usage.js';
import type { BillingDriver } from '../../../server/modules/billing/billing.driver.js';
import { Invoice } from '../../../server/modules/billing/invoice.entity.js';
import { runDueBilling } from '../../../server/modules/billing/renewals.js';
import { SimulatedBillingDriver } from '../../../server/modules/billing/simulated-billing.driver.js';
import { login } from '../../../server/modules/auth/auth.service.js';
import { createInProcessContext } from '../../../server/trpc/context.js';
import { overrideModule } from '../../support/module-runtime.js';
import { testConfig, usingPostgres } from '../../support/env.js';
import { FakeClock } from '../../support/fake-clock.js';
import { createOrg, signedIn } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import {
  addCard,
  billingEvents,
  changePlan,
  expectConsistentInvoice,
  ownDatabase,
} from './billing-helpers.js';
import { waitFor } from '../../support/wait.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';

async function invoicesOf(s: TestServer, token: string, query = '') {
  const res = await http(s.baseUrl, 'GET', `/v1/billing/invoices?limit=100${query}`, { token });
  expect(res.status).to.equal(200);
  return res.body.invoices as any[];
}

async function subscriptionOf(s: TestServer, token: string) {
  return (await http(s.baseUrl, 'GET', '/v1/billing/subscription', { token })).body.subscription;
}

describe('billing renewals on the job queue (BILLING_PERIOD of a second)', function () {
  this.timeout(90_000);
  let s: TestServer;
  let db: Awaited<ReturnType<typeof ownDatabase>>;

  before(async () => {
    db = await ownDatabase('billing_short');
    s = await startTestServer({
      env: { BILLING_PERIOD: '1s', BILLING_RETRY_SCHEDULE: '300ms,300ms', DATABASE_URL: db.url },
    });
  });
  after(async () => {
    await s?.close();
    await db?.drop();
  });

  it('issues one paid invoice per period, contiguous periods, gapless numbers, created then paid', async () => {
    const owner = await createOrg(s.deps);
    await addCard(s.baseUrl, owner.token);
    // A period is a second: on a loaded machine the first renewal can fall due before the card is on file (it fails,
    // then its retry pays it). The renewals held to "created then paid" are those that fell due after.
    const cardAdded = Date.now();
    const withCard = (list: any[]) =>
      list.filter(
        (i) => i.billing_reason === 'subscription_cycle' && Date.parse(i.period.start) >= cardAdded,
      );
    const invoices = await waitFor('two renewals after the card was added', async () => {
      const list = await invoicesOf(s, owner.token);
      return withCard(list).length >= 2 ? list : undefined;
    });
    const renewals = invoices.filter((i) => i.billing_reason === 'subscription_cycle').reverse();
    const starts = renewals.map((i) => i.period.start);
    expect(new Set(starts).size).to.equal(starts.length);
    for (let i = 1; i < renewals.length; i++)
      expect(renewals[i].period.start).to.equal(renewals[i - 1].period.end);
    for (const i of renewals) {
      expect(i.line_items.at(-1)).to.deep.include({ description: 'Starter plan', amount: 29, quantity: 1 });
      expectConsistentInvoice(i);
    }
    const paidAtOnce = withCard(renewals);
    for (const i of paidAtOnce) expect(i.status).to.equal('paid');
    const numbers = renewals.map((i) => Number(i.number.split('-')[1]));
    expect(numbers).to.deep.equal(numbers.map((_, k) => k + 1));
    const events = (await billingEvents(s.deps, owner.organizationId)).filter((e) =>
      e.type.startsWith('billing.invoice'),
    );
    for (const invoice of paidAtOnce) {
      expect(events.filter((e) => e.object.id === invoice.id).map((e) => e.type)).to.deep.equal([
        'billing.invoice.created',
        'billing.invoice.paid',
      ]);
    }
  });

  it('a declining card: open + failed + past_due, retried on the schedule, then uncollectible and canceled', async () => {
    const owner = await createOrg(s.deps);
    await addCard(s.baseUrl, owner.token, 'pm_card_chargeDeclined');
    const pastDue = await waitFor('the subscription to be past_due', async () => {
      const sub = await subscriptionOf(s, owner.token);
      return sub.status === 'past_due' ? sub : undefined;
    });
    expect(pastDue.plan).to.equal('starter');
    const canceled = await waitFor('the subscription to be canceled', async () => {
      const sub = await subscriptionOf(s, owner.token);
      return sub.status === 'canceled' ? sub : undefined;
    });
    expect(canceled.canceled_at).to.be.a('string');
    // The oldest uncollectible invoice is the one whose last retry canceled the subscription (on a slow machine a
    // later period may have been invoiced, and failed, before that).
    const uncollectible = await invoicesOf(s, owner.token, '&status=uncollectible');
    expect(uncollectible.length).to.be.at.least(1);
    const first = uncollectible.at(-1);
    expect(first.attempt_count).to.equal(3);
    expect(first.next_payment_attempt).to.equal(null);
    const events = await billingEvents(s.deps, owner.organizationId);
    const failed = events.filter((e) => e.type === 'billing.invoice.failed' && e.object.id === first.id);
    expect(failed.map((e) => e.object.status)).to.deep.equal(['open', 'open', 'uncollectible']);
    expect(
      events.filter((e) => e.type === 'billing.subscription.updated').map((e) => e.object.status),
    ).to.include.members(['past_due', 'canceled']);

    // Canceled: reads go on, creates are refused with limit 0.
    const create = await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
      token: owner.token,
      body: { name: 'after cancel', location: 'eu-west', protocol: 'openvpn' },
    });
    expect(create.status).to.equal(402);
    expect(create.body.error).to.deep.include({ code: 'PLAN_LIMIT_EXCEEDED' });
    expect(create.body.error.details).to.deep.equal([{ resource: 'vpn_connections', limit: 0, current: 0 }]);
    expect((await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: owner.token })).status).to.equal(
      200,
    );
    const usage = await http(s.baseUrl, 'GET', '/v1/billing/subscription', { token: owner.token });
    expect(usage.body.usage.vpn_connections.limit).to.equal(0);

    // A plan on a canceled subscription starts a new period, charged at once (declined first, then a good card).
    const declined = await changePlan(s.baseUrl, owner.token, { plan: 'pro' });
    expect(declined.status).to.equal(402);
    expect(declined.body.error.code).to.equal('PAYMENT_FAILED');
    expect((await subscriptionOf(s, owner.token)).status).to.equal('canceled');
    const visa = await addCard(s.baseUrl, owner.token, 'pm_card_visa', true);
    const restarted = await changePlan(s.baseUrl, owner.token, { plan: 'pro' });
    expect(restarted.status).to.equal(200);
    expect(restarted.body.subscription).to.deep.include({ plan: 'pro', status: 'active', canceled_at: null });
    expect(restarted.body.subscription.default_payment_method).to.equal(visa.body.payment_method.id);
    expect(restarted.body.invoice).to.deep.include({
      status: 'paid',
      billing_reason: 'subscription_create',
      amount: 79,
    });
    const ok = await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
      token: owner.token,
      body: { name: 'back', location: 'eu-west', protocol: 'openvpn' },
    });
    expect(ok.status).to.equal(201);
  });

  it('cancel_at_period_end ends the subscription at the period end without an invoice', async () => {
    const owner = await createOrg(s.deps);
    await addCard(s.baseUrl, owner.token);
    const res = await changePlan(s.baseUrl, owner.token, { cancel_at_period_end: true });
    expect(res.status).to.equal(200);
    const sub = await waitFor('the subscription to be canceled', async () => {
      const x = await subscriptionOf(s, owner.token);
      return x.status === 'canceled' ? x : undefined;
    });
    const end = res.body.subscription.current_period_end;
    expect(sub.canceled_at).to.equal(end);
    // (A period of a second may have renewed before the PUT; nothing is issued for the period after it.)
    const invoices = await invoicesOf(s, owner.token);
    expect(invoices.filter((i) => Date.parse(i.period.start) >= Date.parse(end))).to.have.length(0);
    const events = await billingEvents(s.deps, owner.organizationId);
    expect(events.at(-1)).to.deep.include({ type: 'billing.subscription.updated' });
    expect(events.at(-1)!.object).to.deep.include({ status: 'canceled', cancel_at_period_end: false });
    const again = await changePlan(s.baseUrl, owner.token, { cancel_at_period_end: false });
    expect(again.status).to.equal(409);
  });

  it('adding a card retries an open invoice at once; POST /invoices/:id/pay charges one', async () => {
    const slowDb = await ownDatabase('billing_slow');
    const slow = await startTestServer({
      env: { BILLING_PERIOD: '1s', BILLING_RETRY_SCHEDULE: '1d', DATABASE_URL: slowDb.url },
    });
    try {
      const owner = await createOrg(slow.deps);
      await addCard(slow.baseUrl, owner.token, 'pm_card_chargeDeclined');
      const open = await waitFor(
        'an open invoice',
        async () => (await invoicesOf(slow, owner.token, '&status=open'))[0],
      );
      const pay = await http(slow.baseUrl, 'POST', `/v1/billing/invoices/${open.id}/pay`, {
        token: owner.token,
      });
      expect(pay.status).to.equal(402);
      expect(pay.body.error.code).to.equal('PAYMENT_FAILED');
      await addCard(slow.baseUrl, owner.token, 'pm_card_mastercard', true);
      const paid = await http(slow.baseUrl, 'GET', `/v1/billing/invoices/${open.id}`, { token: owner.token });
      expect(paid.body.invoice.status).to.equal('paid');
      expect(paid.body.invoice.payment_method).to.deep.equal({
        type: 'card',
        last4: '4444',
        brand: 'mastercard',
      });
      const again = await http(slow.baseUrl, 'POST', `/v1/billing/invoices/${open.id}/pay`, {
        token: owner.token,
      });
      expect(again.status).to.equal(409);
    } finally {
      await slow.close();
      await slowDb.drop();
    }
  });
});

describe('billing renewals: prorations, add-ons and exactly once (fake clock)', function () {
  this.timeout(90_000);
  let s: TestServer;
  let db: Awaited<ReturnType<typeof ownDatabase>>;
  const clock = new FakeClock('2027-03-01T00:00:00.000Z');
  const addOn: UsageReporter = {
    metrics: ['database.instances'],
    async report() {
      return { 'database.instances': 1 };
    },
    async addOns(_em, _org, period) {
      // One medium database (89/month) that existed for half of every period.
      const seconds = (period.end.getTime() - period.start.getTime()) / 2000;
      return [
        { resourceId: 'db_test', description: 'Database orders (medium)', monthlyPriceCents: 8900, seconds },
      ];
    },
  };

  before(async () => {
    db = await ownDatabase('billing_clock');
    s = await startTestServer({ clock, env: { BILLING_PERIOD: '30d', DATABASE_URL: db.url } });
    (s.deps.registry as { usageReporters: readonly UsageReporter[] }).usageReporters = [
      ...s.deps.registry.usageReporters,
      addOn,
    ];
  });
  after(async () => {
    await s?.close();
    await db?.drop();
  });

  /** A caller with a token issued at the fake clock's time (the clock jumps by days). */
  const as = async (owner: { email: string; password: string }) =>
    s.caller(signedIn(await login(createInProcessContext(s.deps), owner)).token);

  const fresh = async (deps: AppDeps) => {
    const owner = await createOrg(deps);
    await addCard(s.baseUrl, owner.token);
    return owner;
  };

  it('the renewal invoice carries pending prorations, the add-ons of the closed period and the next plan period', async () => {
    const owner = await fresh(s.deps);
    clock.advance(15 * 86_400_000);
    const api = await as(owner);
    const change = await api.billing.subscription.update({
      plan: 'pro',
      proration_behavior: 'create_prorations',
    });
    expect(change.invoice).to.equal(null);
    const report = await api.billing.usage.get();
    expect(report.costs).to.deep.equal({ base_plan: 79, overages: 0, add_ons: 44.5, total: 123.5 });
    clock.advance(15 * 86_400_000);
    const done = await runDueBilling(s.deps);
    expect(done.renewals).to.be.at.least(1);
    const { invoices } = await (await as(owner)).billing.invoices.list({});
    expect(invoices).to.have.length(1);
    const [inv] = invoices;
    expect(inv!.line_items.map((l) => [l.description.split(' (')[0], l.amount])).to.deep.equal([
      ['Unused time on Starter plan', -14.5],
      ['Remaining time on Pro plan', 39.5],
      ['Database orders', 44.5],
      ['Pro plan', 79],
    ]);
    expect(inv!.amount).to.equal(148.5);
    expectConsistentInvoice(inv);
  });

  it('POST /invoices/:id/pay charges the payment_method given (a card of the organization, else 404), the default stays', async () => {
    const owner = await createOrg(s.deps);
    const declining = (await addCard(s.baseUrl, owner.token, 'pm_card_chargeDeclined')).body.payment_method;
    clock.advance(30 * 86_400_000);
    await runDueBilling(s.deps);
    const api = await as(owner);
    const [open] = (await api.billing.invoices.list({ status: 'open' })).invoices;
    expect(open).to.not.equal(undefined);
    const token = signedIn(await login(createInProcessContext(s.deps), owner)).token;
    const other = await createOrg(s.deps);
    const othersCard = (await addCard(s.baseUrl, other.token, 'pm_card_visa')).body.payment_method;
    const mastercard = (await addCard(s.baseUrl, token, 'pm_card_mastercard', false)).body.payment_method;
    const pay = (body: unknown) =>
      http(s.baseUrl, 'POST', `/v1/billing/invoices/${open!.id}/pay`, { token, body });

    for (const payment_method of [othersCard.id, 'pm_unknown', 'not-an-id']) {
      const refused = await pay({ payment_method });
      expect(refused.status, payment_method).to.equal(404);
      expect(refused.body.error.code).to.equal('NOT_FOUND');
    }
    const unknown = await pay({ payment_method_id: mastercard.id });
    expect(unknown.status).to.equal(400);
    expect(unknown.body.error.details).to.deep.equal([
      { path: 'payment_method_id', message: 'Unknown field' },
    ]);
    expect((await api.billing.invoices.get({ id: open!.id! })).invoice.status).to.equal('open');

    const paid = await pay({ payment_method: mastercard.id });
    expect(paid.status).to.equal(200);
    expect(paid.body.invoice).to.deep.include({ status: 'paid' });
    expect(paid.body.invoice.payment_method).to.deep.equal({
      type: 'card',
      brand: 'mastercard',
      last4: '4444',
    });
    const sub = (await api.billing.subscription.get()).subscription;
    expect(sub.status).to.equal('active');
    expect(sub.default_payment_method).to.equal(declining.id);
    const events = await billingEvents(s.deps, owner.organizationId);
    expect(events.at(-1)).to.deep.include({ type: 'billing.subscription.updated' });
    expect(events.at(-1)!.object.default_payment_method).to.equal(declining.id);
  });

  it('two sweeps at once, and a sweep repeated, bill each period once', async () => {
    const owners = [];
    for (let i = 0; i < 5; i++) owners.push(await fresh(s.deps));
    clock.advance(31 * 86_400_000);
    await Promise.all([runDueBilling(s.deps), runDueBilling(s.deps), runDueBilling(s.deps)]);
    await runDueBilling(s.deps);
    const em = s.deps.db.orm.em.fork();
    for (const o of owners) {
      const renewals = await em.find(Invoice, {
        organization: o.organizationId,
        billingReason: 'subscription_cycle',
      });
      expect(renewals, o.organizationId).to.have.length(1);
    }
  });

  it('a renewal that dies before its commit leaves nothing; the next run bills the period once', async () => {
    const owner = await fresh(s.deps);
    clock.advance(30 * 86_400_000);
    const real = new SimulatedBillingDriver();
    let crashes = 0;
    const crashing: BillingDriver = {
      attach: (t) => real.attach(t),
      async charge() {
        crashes++;
        throw new Error('process died in the middle of the renewal');
      },
    };
    const restore = overrideModule(s.deps, 'billing', { driver: crashing });
    try {
      await runDueBilling(s.deps).catch(() => undefined);
    } finally {
      restore();
    }
    expect(crashes).to.be.greaterThan(0);
    const em = s.deps.db.orm.em.fork();
    expect(await em.count(Invoice, { organization: owner.organizationId })).to.equal(0);
    await runDueBilling(s.deps);
    await runDueBilling(s.deps);
    expect(
      await em
        .fork()
        .count(Invoice, { organization: owner.organizationId, billingReason: 'subscription_cycle' }),
    ).to.equal(1);
  });
});

describe('billing renewal across a restart', function () {
  this.timeout(120_000);
  let pgliteDir: string | undefined;
  let databaseUrl: string | undefined;
  let scratch: ScratchDatabase | undefined;

  before(async () => {
    if (usingPostgres) {
      scratch = await ownPostgresDatabase('billing_restart');
      databaseUrl = scratch?.url;
    } else {
      pgliteDir = join(mkdtempSync(join(tmpdir(), 'billing-restart-')), 'pglite');
    }
  });

  after(async () => {
    if (pgliteDir) rmSync(join(pgliteDir, '..'), { recursive: true, force: true });
    await scratch?.drop();
  });

  it('a process stopped in the middle of a renewal: the next one bills that period once, and every later one once', async () => {
    const config = testConfig({ BILLING_PERIOD: '2s', DATABASE_URL: databaseUrl });
    // Every charge of this process dies mid-renewal (its transaction never commits).
    const real = new SimulatedBillingDriver();
    let attempts = 0;
    const killed: BillingDriver = {
      attach: (t) => real.attach(t),
      async charge() {
        attempts++;
        throw new Error('killed');
      },
    };
    const first = await startTestServer({
      config,
      pgliteDataDir: pgliteDir,
      modules: { billing: { driver: killed } },
    });
    const owner = await createOrg(first.deps);
    await addCard(first.baseUrl, owner.token);
    await waitFor('a charge attempt', async () => attempts > 0, { timeoutMs: 10_000 });
    await first.close();

    const second = await startTestServer({ config, pgliteDataDir: pgliteDir });
    try {
      const invoices = await waitFor(
        'two invoices',
        async () => {
          const list = (
            await http(second.baseUrl, 'GET', '/v1/billing/invoices?limit=100', { token: owner.token })
          ).body.invoices as any[];
          return list.length >= 2 ? list : undefined;
        },
        { timeoutMs: 20_000 },
      );
      const starts = invoices.map((i) => i.period.start);
      expect(new Set(starts).size, 'a period billed twice').to.equal(starts.length);
      for (const i of invoices) expect(i.status).to.equal('paid');
      const numbers = invoices.map((i) => Number(i.number.split('-')[1])).sort((a, b) => a - b);
      expect(numbers).to.deep.equal(numbers.map((_, k) => k + 1));
    } finally {
      await second.close();
    }
  });
});
