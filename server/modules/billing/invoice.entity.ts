import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { BaseSchema } from '../../db/base.entity.js';
import { BILLING_REASONS, INVOICE_STATUSES } from './billing.constants.js';
import { Subscription } from './subscription.entity.js';

/** One line of an invoice, amounts in cents. */
export interface InvoiceLine {
  description: string;
  amount: number;
  quantity: number;
  period_start: string | null;
  period_end: string | null;
}

/** The card an invoice was charged to, as shown (kept on the invoice: the card may be removed later). */
export interface InvoiceCard {
  type: 'card';
  brand: string;
  last4: string;
}

/** Amounts in cents; `amount` is the sum of the lines, `total` = `amount` + `tax`. */
export const InvoiceSchema = defineEntity({
  name: 'Invoice',
  tableName: 'invoices',
  extends: BaseSchema,
  // As the billing migration creates them (tests/db/schema-drift.test.ts).
  indexes: [
    // A page for any combination of the list's filters is a range of this index (migration 30, list_counts).
    {
      name: 'invoices_filter_index',
      expression:
        'create index "invoices_filter_index" on "invoices" ("organization_id", "status", "created_at" desc, "id" desc)',
    },
    {
      name: 'invoices_organization_id_index',
      expression:
        'create index "invoices_organization_id_index" on "invoices" ("organization_id", "created_at" desc, "id" desc)',
    },
    { name: 'invoices_retry_index', properties: ['nextPaymentAttempt'], where: { status: 'open' } },
  ],
  uniques: [
    { name: 'invoices_number_unique', properties: ['organization', 'number'] },
    {
      name: 'invoices_renewal_unique',
      properties: ['subscription', 'renewalOf'],
      where: { renewalOf: { $ne: null } },
    },
  ],
  checks: [{ name: 'invoices_check', expression: '"total" = "amount" + "tax"' }],
  properties: {
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    subscription: () => p.manyToOne(Subscription).index().deleteRule('cascade'),
    number: p.string().length(16),
    status: p.enum(INVOICE_STATUSES),
    billingReason: p.enum(BILLING_REASONS),
    currency: p.string().length(3).default('usd'),
    lineItems: p.json<InvoiceLine[]>(),
    amount: p.integer(),
    tax: p.integer(),
    /** TAX_RATE in thousandths of a percent when issued. */
    taxRateMilli: p.integer(),
    taxJurisdiction: p.string().length(100),
    total: p.integer(),
    periodStart: p.datetime(3).nullable().columnType('timestamptz(3)'),
    periodEnd: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** Renewal invoices: the start of the period they open (unique per subscription: no period billed twice). */
    renewalOf: p.datetime(3).nullable().columnType('timestamptz(3)'),
    dueDate: p.datetime(3).columnType('timestamptz(3)'),
    paidAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    paymentMethod: p.json<InvoiceCard>().nullable(),
    chargeId: p.string().length(64).nullable(),
    attemptCount: p.integer().default(0),
    /** Scheduled retries done (BILLING_RETRY_SCHEDULE); attempts the customer starts do not count. */
    scheduledRetries: p.integer().default(0),
    nextPaymentAttempt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class Invoice extends InvoiceSchema.class {}
InvoiceSchema.setClass(Invoice);
