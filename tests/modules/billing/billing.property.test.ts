// Test tier: server
import { expect } from 'chai';
import { FakeClock } from '../../support/fake-clock.js';
import { createOrg, signedIn } from '../../support/factories.js';
import { login } from '../../../server/modules/auth/auth.service.js';
import { createInProcessContext } from '../../../server/trpc/context.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { expectConsistentInvoice, ownDatabase } from './billing-helpers.js';
import { runDueBilling } from '../../../server/modules/billing/renewals.js';

/** A small deterministic generator, so a failure can be replayed from its seed. */
function rng(seed: number) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

describe('billing property: random plan changes keep every invoice exact', function () {
  this.timeout(120_000);
  let s: TestServer;
  const clock = new FakeClock('2027-01-31T10:00:00.000Z');

  let db: Awaited<ReturnType<typeof ownDatabase>>;

  before(async () => {
    db = await ownDatabase('billing_property');
    s = await startTestServer({
      clock,
      env: { TAX_RATE: '8.875', TAX_JURISDICTION: 'US-NY', DATABASE_URL: db.url },
    });
  });
  after(async () => {
    await s?.close();
    await db?.drop();
  });

  it('amounts have at most two decimals, total = amount + tax, amount = Σ lines', async () => {
    const plans = ['starter', 'pro', 'enterprise'] as const;
    const behaviors = ['always_invoice', 'create_prorations', 'none'] as const;
    for (const seed of [1, 7, 42]) {
      const next = rng(seed);
      const owner = await createOrg(s.deps);
      let api = s.caller(owner.token);
      await api.billing.paymentMethods.create({ payment_method: 'pm_card_visa' });
      for (let step = 0; step < 25; step++) {
        clock.advance(Math.floor(next() * 5 * 86_400_000));
        await runDueBilling(s.deps);
        // The clock jumps by days: a fresh token each step.
        const t = signedIn(
          await login(createInProcessContext(s.deps), { email: owner.email, password: owner.password }),
        );
        api = s.caller(t.token);
        const plan = plans[Math.floor(next() * plans.length)]!;
        const proration_behavior = behaviors[Math.floor(next() * behaviors.length)]!;
        const preview = await api.billing.subscription.preview({ plan, proration_behavior });
        expectConsistentInvoice(preview.invoice);
        const res = await api.billing.subscription.update({ plan, proration_behavior });
        expect(res.subscription.plan).to.equal(plan);
        if (res.invoice) {
          expectConsistentInvoice(res.invoice);
          expect(res.invoice.total).to.equal(preview.invoice.total);
        }
      }
      const all = await api.billing.invoices.list({ limit: 100 });
      expect(all.total).to.be.greaterThan(3);
      for (const invoice of all.invoices) {
        expectConsistentInvoice(invoice);
        expect(invoice.tax.rate).to.equal(8.875);
        expect(invoice.tax.jurisdiction).to.equal('US-NY');
        expect(Math.round(invoice.amount * 8.875)).to.be.closeTo(Math.round(invoice.tax.amount * 100), 1);
      }
      // Numbers are gapless, from -0001.
      const numbers = all.invoices.map((i) => Number(i.number!.split('-')[1])).sort((a, b) => a - b);
      expect(numbers).to.deep.equal(numbers.map((_, i) => i + 1));
    }
  });
});
