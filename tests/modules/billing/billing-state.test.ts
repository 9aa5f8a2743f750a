// Test tier: unit
import { expect } from 'chai';
import { refusal } from '../../support/refusal.js';
import {
  INVOICE_STATUSES,
  INVOICE_TRANSITIONS,
  canTransition as invoiceCanTransition,
  transition as transitionInvoice,
  type InvoiceStatus,
} from '../../../server/modules/billing/invoice-state.js';
import {
  SUBSCRIPTION_STATUSES,
  SUBSCRIPTION_TRANSITIONS,
  canTransition as subscriptionCanTransition,
  transition as transitionSubscription,
  type SubscriptionStatus,
} from '../../../server/modules/billing/subscription-state.js';

describe('the billing state machines (invoice-state.ts, subscription-state.ts)', () => {
  it('an invoice moves only from open: to paid, void or uncollectible', () => {
    const allowed = INVOICE_STATUSES.flatMap((from) =>
      INVOICE_STATUSES.filter((to) => invoiceCanTransition(from, to)).map((to) => `${from}>${to}`),
    );
    expect(allowed).to.deep.equal(['open>paid', 'open>void', 'open>uncollectible']);
    expect(Object.keys(INVOICE_TRANSITIONS)).to.have.members([...INVOICE_STATUSES]);
  });

  it('sets an allowed invoice status, and refuses any other with the 409 of POST .../pay', () => {
    const invoice = { status: 'open' as InvoiceStatus };
    transitionInvoice(invoice, 'paid');
    expect(invoice.status).to.equal('paid');
    const e = refusal(() => transitionInvoice(invoice, 'paid'));
    expect(e.status).to.equal(409);
    expect(e.message).to.equal('The invoice is paid; only open invoices can be paid');
    expect(refusal(() => transitionInvoice(invoice, 'void')).message).to.equal(
      'The invoice is paid; only open invoices can be voided',
    );
    expect(invoice.status).to.equal('paid');
  });

  it('a subscription moves active ⇄ past_due, to canceled, and from canceled back to active only', () => {
    const allowed = SUBSCRIPTION_STATUSES.flatMap((from) =>
      SUBSCRIPTION_STATUSES.filter((to) => subscriptionCanTransition(from, to)).map((to) => `${from}>${to}`),
    );
    expect(allowed).to.deep.equal([
      'active>past_due',
      'active>canceled',
      'past_due>active',
      'past_due>canceled',
      'canceled>active',
    ]);
    expect(Object.keys(SUBSCRIPTION_TRANSITIONS)).to.have.members([...SUBSCRIPTION_STATUSES]);
  });

  it('sets an allowed subscription status, and refuses any other with a 409, changing nothing', () => {
    const sub = { status: 'active' as SubscriptionStatus };
    transitionSubscription(sub, 'canceled');
    expect(sub.status).to.equal('canceled');
    const e = refusal(() => transitionSubscription(sub, 'past_due'));
    expect(e.status).to.equal(409);
    expect(e.message).to.equal('The subscription is canceled: it cannot become past_due');
    expect(sub.status).to.equal('canceled');
  });
});
