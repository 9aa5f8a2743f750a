/** Enums and fixed values of billing (docs/billing.md, "Billing"). */
export const SUBSCRIPTION_STATUSES = ['active', 'past_due', 'canceled'] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

export const INVOICE_STATUSES = ['draft', 'open', 'paid', 'void', 'uncollectible'] as const;
export type InvoiceStatus = (typeof INVOICE_STATUSES)[number];

/** Why an invoice was issued (as Stripe names them). */
export const BILLING_REASONS = [
  'subscription_cycle',
  'subscription_update',
  'subscription_create',
  'subscription_final',
] as const;
export type BillingReason = (typeof BILLING_REASONS)[number];

export const PRORATION_BEHAVIORS = ['always_invoice', 'create_prorations', 'none'] as const;
export type ProrationBehavior = (typeof PRORATION_BEHAVIORS)[number];

/** Hosted invoice pages and PDFs are opened through a signed link valid this long. */
export const INVOICE_LINK_TTL_MS = 30 * 86_400_000;
/** The signing purpose of invoice links (server/access/tokens.ts signLink). */
export const INVOICE_LINK_PURPOSE = 'invoice';

/** Subscriptions renewed per transaction by the renewal sweep. */
export const RENEWAL_BATCH = 100;
