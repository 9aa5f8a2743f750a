import type { Organization } from '../../access/organization.entity.js';
import type { AppDeps } from '../../kit/deps.js';
import { iso } from '../../lib/time.js';
import { INVOICE_LINK_PURPOSE, INVOICE_LINK_TTL_MS } from './billing.constants.js';
import type { Invoice, InvoiceLine } from './invoice.entity.js';
import { toUnits } from './money.js';
import type { PaymentMethod } from './payment-method.entity.js';
import type { TInvoice, TPaymentMethod, TSubscription } from './billing.schema.js';
import type { Subscription } from './subscription.entity.js';

/** The signed part of an invoice link: `<expiry, epoch seconds>.<signature of "<invoice id>.<expiry>">`. */
export function invoiceLinkToken(deps: AppDeps, invoiceId: string, now: Date): string {
  const exp = Math.floor((now.getTime() + INVOICE_LINK_TTL_MS) / 1000);
  return `${exp}.${deps.tokens.signLink(INVOICE_LINK_PURPOSE, `${invoiceId}.${exp}`)}`;
}

/** Whether `token` is a link token of this invoice that has not expired. */
export function checkInvoiceLinkToken(deps: AppDeps, invoiceId: string, token: string, now: Date): boolean {
  const m = /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!m) return false;
  const exp = Number(m[1]);
  if (exp * 1000 <= now.getTime()) return false;
  return deps.tokens.verifyLink(INVOICE_LINK_PURPOSE, `${invoiceId}.${exp}`, m[2]!);
}

export function invoiceUrls(deps: AppDeps, invoiceId: string, now: Date) {
  const token = invoiceLinkToken(deps, invoiceId, now);
  const base = `${deps.config.publicBaseUrl}/v1/billing/invoices/${invoiceId}`;
  return { hosted: `${base}/hosted?token=${token}`, pdf: `${base}/pdf?token=${token}` };
}

function lineDto(l: InvoiceLine): TInvoice['line_items'][number] {
  return {
    description: l.description,
    amount: toUnits(l.amount),
    quantity: l.quantity,
    period: l.period_start && l.period_end ? { start: l.period_start, end: l.period_end } : null,
  };
}

/** An invoice as issued or previewed (a preview has no id, number or links). */
export interface InvoiceView {
  id: string | null;
  number: string | null;
  subscriptionId: string;
  status: Invoice['status'];
  billingReason: Invoice['billingReason'];
  lineItems: InvoiceLine[];
  amount: number;
  tax: number;
  taxRateMilli: number;
  taxJurisdiction: string;
  total: number;
  periodStart: Date | null;
  periodEnd: Date | null;
  createdAt: Date;
  dueDate: Date;
  paidAt: Date | null;
  paymentMethod: Invoice['paymentMethod'];
  attemptCount: number;
  nextPaymentAttempt: Date | null;
}

export function invoiceView(i: Invoice): InvoiceView {
  return {
    id: i.id,
    number: i.number,
    subscriptionId: i.subscription.id,
    status: i.status,
    billingReason: i.billingReason,
    lineItems: i.lineItems,
    amount: i.amount,
    tax: i.tax,
    taxRateMilli: i.taxRateMilli,
    taxJurisdiction: i.taxJurisdiction,
    total: i.total,
    periodStart: i.periodStart ?? null,
    periodEnd: i.periodEnd ?? null,
    createdAt: i.createdAt,
    dueDate: i.dueDate,
    paidAt: i.paidAt ?? null,
    paymentMethod: i.paymentMethod ?? null,
    attemptCount: i.attemptCount,
    nextPaymentAttempt: i.nextPaymentAttempt ?? null,
  };
}

export function toInvoiceDto(deps: AppDeps, v: InvoiceView | Invoice, now: Date): TInvoice {
  const i = 'subscriptionId' in v ? v : invoiceView(v);
  const urls = i.id ? invoiceUrls(deps, i.id, now) : null;
  return {
    id: i.id,
    number: i.number,
    subscription_id: i.subscriptionId,
    status: i.status,
    billing_reason: i.billingReason,
    currency: 'usd',
    amount: toUnits(i.amount),
    tax: { amount: toUnits(i.tax), rate: i.taxRateMilli / 1000, jurisdiction: i.taxJurisdiction },
    total: toUnits(i.total),
    line_items: i.lineItems.map(lineDto),
    period: i.periodStart && i.periodEnd ? { start: iso(i.periodStart)!, end: iso(i.periodEnd)! } : null,
    created: iso(i.createdAt)!,
    due_date: iso(i.dueDate)!,
    paid_at: iso(i.paidAt),
    payment_method: i.paymentMethod
      ? { type: 'card', last4: i.paymentMethod.last4, brand: i.paymentMethod.brand }
      : null,
    attempt_count: i.attemptCount,
    next_payment_attempt: iso(i.nextPaymentAttempt),
    hosted_invoice_url: urls?.hosted ?? null,
    pdf_url: urls?.pdf ?? null,
  };
}

export function toSubscriptionDto(
  sub: Subscription,
  org: Organization,
  defaultPaymentMethod: string | null,
): TSubscription {
  return {
    id: sub.id,
    plan: org.plan,
    status: sub.status,
    current_period_start: iso(sub.currentPeriodStart)!,
    current_period_end: iso(sub.currentPeriodEnd)!,
    cancel_at_period_end: sub.cancelAtPeriodEnd,
    canceled_at: iso(sub.canceledAt),
    trial_end: null,
    default_payment_method: defaultPaymentMethod,
    credit_balance: toUnits(sub.creditBalance),
    created: iso(sub.createdAt)!,
  };
}

export function toPaymentMethodDto(pm: PaymentMethod): TPaymentMethod {
  return {
    id: pm.id,
    type: 'card',
    card: { brand: pm.brand, last4: pm.last4, exp_month: pm.expMonth, exp_year: pm.expYear },
    is_default: pm.isDefault,
    created: iso(pm.createdAt)!,
  };
}
