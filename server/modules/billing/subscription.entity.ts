import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { BaseSchema } from '../../db/base.entity.js';
import { SUBSCRIPTION_STATUSES } from './billing.constants.js';

/** A line waiting for the next renewal invoice (`proration_behavior: create_prorations`). Amounts in cents. */
export interface PendingItem {
  description: string;
  amount: number;
  quantity: number;
  period_start: string | null;
  period_end: string | null;
}

/**
 * One per organization, created with it. The plan itself is `organizations.plan` (the one place the plan-limit
 * check and the API quota read it); the state is mirrored into `organizations.plan_status` in the same
 * transaction.
 */
export const SubscriptionSchema = defineEntity({
  name: 'Subscription',
  tableName: 'subscriptions',
  extends: BaseSchema,
  // As the billing migration creates them (tests/db/schema-drift.test.ts): the renewals due, and a sane period.
  indexes: [
    {
      name: 'subscriptions_due_index',
      properties: ['currentPeriodEnd'],
      where: { status: { $ne: 'canceled' } },
    },
  ],
  checks: [{ name: 'subscriptions_check', expression: '"current_period_end" > "current_period_start"' }],
  properties: {
    organization: () => p.manyToOne(Organization).unique().deleteRule('cascade'),
    status: p.enum(SUBSCRIPTION_STATUSES).default('active'),
    currentPeriodStart: p.datetime(3).columnType('timestamptz(3)'),
    currentPeriodEnd: p.datetime(3).columnType('timestamptz(3)'),
    /** Calendar-month periods are counted from here (the start of the subscription, or of its restart). */
    billingAnchor: p.datetime(3).columnType('timestamptz(3)'),
    cancelAtPeriodEnd: p.boolean().default(false),
    canceledAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** The 8 characters every invoice number of the organization starts with. */
    invoicePrefix: p.string().length(8).unique(),
    /** The last invoice number issued (gapless: taken under this row's lock, in the invoice's transaction). */
    invoiceSeq: p.integer().default(0),
    pendingItems: p.json<PendingItem[]>().default('[]'),
    /** Credit from invoices that came out negative (downgrades), before tax, in cents: taken off the next ones. */
    creditBalance: p.integer().default(0),
  },
});
export class Subscription extends SubscriptionSchema.class {}
SubscriptionSchema.setClass(Subscription);
