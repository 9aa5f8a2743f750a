import { defineEvent } from '../../events/define-event.js';
import { ZInvoice, ZSubscription } from './billing.schema.js';

export const billingInvoiceCreated = defineEvent('billing.invoice.created', ZInvoice, {
  description: 'An invoice was issued (renewal, plan change, restart or final invoice).',
});
export const billingInvoicePaid = defineEvent('billing.invoice.paid', ZInvoice, {
  description: 'An invoice was paid (charged, or settled by credit when it came to nothing or less).',
});
export const billingInvoiceFailed = defineEvent('billing.invoice.failed', ZInvoice, {
  description:
    'A charge of an invoice was declined (or no payment method was on file): the invoice stays `open` and is ' +
    'retried, or is `void` when the change that needed it was refused.',
});
export const billingSubscriptionUpdated = defineEvent('billing.subscription.updated', ZSubscription, {
  description: 'Plan change, cancellation set or undone, renewal, or status change of the subscription.',
});

export const BILLING_EVENTS = [
  billingInvoiceCreated,
  billingInvoicePaid,
  billingInvoiceFailed,
  billingSubscriptionUpdated,
];
