import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import type { Em } from '../../db/orm.js';
import type { AppDeps } from '../../kit/deps.js';
import { newId } from '../../lib/ids.js';
import { PLANS, type PlanId } from '../../lib/plans.js';
import { iso } from '../../lib/time.js';
import type { BillingReason, SubscriptionStatus } from './billing.constants.js';
import { toInvoiceDto, toSubscriptionDto, type InvoiceView } from './billing.dto.js';
import {
  billingInvoiceCreated,
  billingInvoiceFailed,
  billingInvoicePaid,
  billingSubscriptionUpdated,
} from './billing.events.js';
import type { Locked } from './billing.repository.js';
import type { Invoice, InvoiceLine } from './invoice.entity.js';
import { transition as transitionInvoice } from './invoice-state.js';
import { rateMilli, taxCents, unitsToCents } from './money.js';
import type { PaymentMethod } from './payment-method.entity.js';
import type { Subscription } from './subscription.entity.js';
import { transition as transitionSubscription } from './subscription-state.js';

export type { Locked };

export function planPriceCents(plan: PlanId): number {
  return unitsToCents(PLANS[plan].price);
}

export function line(
  description: string,
  amount: number,
  period: { start: Date; end: Date } | null = null,
  quantity = 1,
): InvoiceLine {
  return {
    description,
    amount,
    quantity,
    period_start: period ? iso(period.start) : null,
    period_end: period ? iso(period.end) : null,
  };
}

/**
 * The invoice that `lines` make now, not yet stored: credit from earlier negative invoices is taken off a positive
 * amount (as a line, before tax), then tax and total. Pure: what a preview shows is what an issue stores.
 */
export function draftInvoice(
  deps: AppDeps,
  sub: Subscription,
  spec: {
    lines: InvoiceLine[];
    reason: BillingReason;
    period: { start: Date; end: Date } | null;
    now: Date;
  },
): { view: InvoiceView; creditUsed: number } {
  const lines = [...spec.lines];
  let amount = lines.reduce((s, l) => s + l.amount, 0);
  let creditUsed = 0;
  if (amount > 0 && sub.creditBalance > 0) {
    creditUsed = Math.min(sub.creditBalance, amount);
    lines.push(line('Credit from earlier invoices', -creditUsed));
    amount -= creditUsed;
  }
  const { taxRate, taxJurisdiction } = deps.config.billing;
  const tax = taxCents(amount, taxRate);
  return {
    creditUsed,
    view: {
      id: null,
      number: null,
      subscriptionId: sub.id,
      status: 'draft',
      billingReason: spec.reason,
      lineItems: lines,
      amount,
      tax,
      taxRateMilli: rateMilli(taxRate),
      taxJurisdiction,
      total: amount + tax,
      periodStart: spec.period?.start ?? null,
      periodEnd: spec.period?.end ?? null,
      createdAt: spec.now,
      dueDate: spec.now,
      paidAt: null,
      paymentMethod: null,
      attemptCount: 0,
      nextPaymentAttempt: null,
    },
  };
}

export interface Issued {
  invoice: Invoice;
  /** False when the charge was declined or no payment method was on file. */
  paid: boolean;
  declineReason?: string;
}

/**
 * Issues an invoice in `tx` (numbered under the subscription's lock, so numbers are gapless) and charges it to the
 * default payment method at once. An amount of zero or less needs no charge: the invoice is paid, and a negative
 * amount becomes credit for the next invoices. On a decline: `onDecline: 'void'` (a change that needs the money
 * is refused: the invoice is void and the credit it used is given back) or `'retry'` (renewals: the invoice stays
 * open, is retried on BILLING_RETRY_SCHEDULE, and the subscription becomes `past_due`).
 */
export async function issueInvoice(
  tx: Em,
  deps: AppDeps,
  locked: Locked,
  pm: PaymentMethod | null,
  spec: {
    lines: InvoiceLine[];
    reason: BillingReason;
    period: { start: Date; end: Date } | null;
    renewalOf?: Date;
    now: Date;
    onDecline: 'void' | 'retry';
  },
): Promise<Issued> {
  const { sub, org } = locked;
  const now = spec.now;
  const repository = repositoryOf(deps, 'billing');
  const { view, creditUsed } = draftInvoice(deps, sub, spec);
  sub.creditBalance -= creditUsed;
  sub.invoiceSeq += 1;
  const invoice = repository.createInvoice(tx, {
    id: newId('inv'),
    now,
    organization: org,
    subscription: sub,
    number: `${sub.invoicePrefix}-${String(sub.invoiceSeq).padStart(4, '0')}`,
    billingReason: view.billingReason,
    lineItems: view.lineItems,
    amount: view.amount,
    tax: view.tax,
    taxRateMilli: view.taxRateMilli,
    taxJurisdiction: view.taxJurisdiction,
    total: view.total,
    periodStart: view.periodStart,
    periodEnd: view.periodEnd,
    renewalOf: spec.renewalOf ?? null,
  });
  const result = await chargeInvoice(deps, invoice, pm, `${invoice.id}:1`, now);
  if (invoice.amount < 0) sub.creditBalance += -invoice.amount;
  if (result.paid) {
    repository.recordEvent(tx, billingInvoiceCreated, toInvoiceDto(deps, invoice, now), org.id, now);
    repository.recordEvent(tx, billingInvoicePaid, toInvoiceDto(deps, invoice, now), org.id, now);
    return { invoice, paid: true };
  }
  if (spec.onDecline === 'void') {
    transitionInvoice(invoice, 'void');
    sub.creditBalance += creditUsed;
    repository.recordEvent(tx, billingInvoiceCreated, toInvoiceDto(deps, invoice, now), org.id, now);
    repository.recordEvent(tx, billingInvoiceFailed, toInvoiceDto(deps, invoice, now), org.id, now);
    return { invoice, paid: false, declineReason: result.reason };
  }
  repository.recordEvent(tx, billingInvoiceCreated, toInvoiceDto(deps, invoice, now), org.id, now);
  await afterFailedAttempt(tx, deps, locked, pm?.id ?? null, invoice, now, true);
  return { invoice, paid: false, declineReason: result.reason };
}

/** Charges what an invoice still owes to `pm`; settles invoices of zero or less without a charge. */
async function chargeInvoice(
  deps: AppDeps,
  invoice: Invoice,
  pm: PaymentMethod | null,
  idempotencyKey: string,
  now: Date,
): Promise<{ paid: boolean; reason?: string }> {
  if (invoice.total <= 0) {
    transitionInvoice(invoice, 'paid');
    invoice.paidAt = now;
    invoice.updatedAt = now;
    return { paid: true };
  }
  invoice.attemptCount += 1;
  invoice.updatedAt = now;
  if (!pm) return { paid: false, reason: 'No payment method on file' };
  invoice.paymentMethod = { type: 'card', brand: pm.brand, last4: pm.last4 };
  const result = await runtimeOf(deps, 'billing').driver.charge({
    processorRef: pm.processorRef,
    amountCents: invoice.total,
    currency: 'usd',
    idempotencyKey,
    description: `Invoice ${invoice.number}`,
  });
  if (result.status === 'declined') return { paid: false, reason: result.reason };
  transitionInvoice(invoice, 'paid');
  invoice.paidAt = now;
  invoice.chargeId = result.chargeId;
  invoice.nextPaymentAttempt = null;
  return { paid: true };
}

/** A `billing.subscription.updated` event with the subscription as it is now. */
export async function recordSubscriptionUpdated(
  tx: Em,
  deps: AppDeps,
  locked: Locked,
  at: Date,
  defaultPm?: string | null,
): Promise<void> {
  const repository = repositoryOf(deps, 'billing');
  const pmId =
    defaultPm !== undefined
      ? defaultPm
      : ((await repository.defaultPaymentMethod(tx, locked.org.id))?.id ?? null);
  repository.recordEvent(
    tx,
    billingSubscriptionUpdated,
    toSubscriptionDto(locked.sub, locked.org, pmId),
    locked.org.id,
    at,
  );
}

/** Sets the subscription's state and its mirror on the organization (read by the plan-limit check). */
export function setStatus(locked: Locked, status: SubscriptionStatus, now: Date): boolean {
  if (locked.sub.status === status) return false;
  transitionSubscription(locked.sub, status);
  locked.org.planStatus = status;
  if (status === 'canceled') {
    locked.sub.canceledAt = now;
    locked.sub.cancelAtPeriodEnd = false;
  }
  locked.sub.updatedAt = now;
  return true;
}

/**
 * After a declined attempt of an open invoice: `billing.invoice.failed`; a scheduled attempt moves the invoice along
 * BILLING_RETRY_SCHEDULE, and after the last one the invoice is `uncollectible` and the subscription `canceled`.
 * The subscription is `past_due` meanwhile.
 */
async function afterFailedAttempt(
  tx: Em,
  deps: AppDeps,
  locked: Locked,
  defaultPmId: string | null,
  invoice: Invoice,
  now: Date,
  scheduled: boolean,
): Promise<void> {
  const schedule = deps.config.billing.retryScheduleMs;
  const repository = repositoryOf(deps, 'billing');
  let statusChanged = false;
  if (scheduled) {
    // The first attempt is not a retry; each scheduled attempt after it is.
    if (invoice.attemptCount > 1 || invoice.scheduledRetries > 0) invoice.scheduledRetries += 1;
    if (invoice.scheduledRetries >= schedule.length) {
      transitionInvoice(invoice, 'uncollectible');
      invoice.nextPaymentAttempt = null;
      repository.recordEvent(tx, billingInvoiceFailed, toInvoiceDto(deps, invoice, now), locked.org.id, now);
      if (setStatus(locked, 'canceled', now)) statusChanged = true;
      if (statusChanged) await recordSubscriptionUpdated(tx, deps, locked, now, defaultPmId);
      return;
    }
    invoice.nextPaymentAttempt = new Date(now.getTime() + schedule[invoice.scheduledRetries]!);
  }
  repository.recordEvent(tx, billingInvoiceFailed, toInvoiceDto(deps, invoice, now), locked.org.id, now);
  if (locked.sub.status === 'active' && setStatus(locked, 'past_due', now)) statusChanged = true;
  if (statusChanged) await recordSubscriptionUpdated(tx, deps, locked, now, defaultPmId);
}

/**
 * Charges an open invoice again: a scheduled retry (only when due) or one the customer asked for (a new payment
 * method, `POST /billing/invoices/:id/pay`), which does not move the schedule. Paid: the subscription is `active`
 * again once nothing is left open. `defaultPmId` is the organization's default payment method, as events show it
 * (`pm`'s own id unless the charge went to another card).
 */
export async function retryInvoice(
  tx: Em,
  deps: AppDeps,
  locked: Locked,
  invoice: Invoice,
  pm: PaymentMethod | null,
  now: Date,
  scheduled: boolean,
  defaultPmId: string | null = pm?.id ?? null,
): Promise<{ paid: boolean; reason?: string } | null> {
  if (invoice.status !== 'open') return null;
  if (scheduled && (!invoice.nextPaymentAttempt || invoice.nextPaymentAttempt > now)) return null;
  const result = await chargeInvoice(deps, invoice, pm, `${invoice.id}:${invoice.attemptCount + 1}`, now);
  if (result.paid) {
    const repository = repositoryOf(deps, 'billing');
    repository.recordEvent(tx, billingInvoicePaid, toInvoiceDto(deps, invoice, now), locked.org.id, now);
    if (locked.sub.status === 'past_due') {
      const stillOpen = await repository.countOtherOpenInvoices(tx, locked.sub.id, invoice.id);
      if (stillOpen === 0 && setStatus(locked, 'active', now)) {
        await recordSubscriptionUpdated(tx, deps, locked, now, defaultPmId);
      }
    }
    return result;
  }
  await afterFailedAttempt(tx, deps, locked, defaultPmId, invoice, now, scheduled);
  return result;
}
