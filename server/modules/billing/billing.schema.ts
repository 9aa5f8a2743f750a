import { z } from 'zod';
import { cursorQueryShape, cursorResponse } from '../../lib/pagination.js';
import { PLAN_IDS } from '../../lib/plans.js';
import { okResponse, zPathId } from '../../lib/schema.js';
import {
  BILLING_REASONS,
  INVOICE_STATUSES,
  PRORATION_BEHAVIORS,
  SUBSCRIPTION_STATUSES,
} from './billing.constants.js';

const ZTimestamp = z.string().describe('ISO 8601 UTC with milliseconds');
const ZNullableTimestamp = z.string().nullable().describe('ISO 8601 UTC with milliseconds, or null');
const ZMoney = z.number().describe('An amount in currency units with at most two decimals (`79`, `26.33`)');

// ---------- inputs ----------

const ZPlanId = z.enum(PLAN_IDS).describe('`starter`, `pro` or `enterprise`');
const ZProrationBehavior = z
  .enum(PRORATION_BEHAVIORS)
  .describe(
    '`always_invoice` (default): invoice the proration now and charge it at once; `create_prorations`: add the ' +
      'proration lines to the next renewal invoice; `none`: prorate nothing',
  );

export const ZUpdateSubscriptionInput = z.strictObject({
  plan: ZPlanId.optional().describe('The new plan; takes effect at once (limits and quota included)'),
  payment_method: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe('A payment method of the organization (`pm_…`): becomes the default, charged by this change'),
  proration_behavior: ZProrationBehavior.optional(),
  cancel_at_period_end: z
    .boolean()
    .optional()
    .describe('`true` ends the subscription at the end of the period (no renewal); `false` undoes it'),
});
export type TUpdateSubscriptionInput = z.infer<typeof ZUpdateSubscriptionInput>;

export const ZPreviewInput = z.strictObject({
  plan: ZPlanId,
  proration_behavior: ZProrationBehavior.optional(),
});
export type TPreviewInput = z.infer<typeof ZPreviewInput>;

export const ZAddPaymentMethodInput = z.strictObject({
  payment_method: z
    .string()
    .min(1)
    .max(64)
    .describe(
      'A token of the card processor: with the simulated processor `pm_card_visa`, `pm_card_mastercard`, ' +
        '`pm_card_amex` or `pm_card_chargeDeclined` (attaches; every charge is declined)',
    ),
  set_as_default: z
    .boolean()
    .optional()
    .describe('Make it the default payment method (the first one always is)'),
});
export type TAddPaymentMethodInput = z.infer<typeof ZAddPaymentMethodInput>;

export const ZPaymentMethodIdInput = z.object({ id: zPathId('pm', 'Payment method') });
export type TPaymentMethodIdInput = z.infer<typeof ZPaymentMethodIdInput>;

export const ZInvoiceIdInput = z.object({ id: zPathId('inv', 'Invoice') });
export type TInvoiceIdInput = z.infer<typeof ZInvoiceIdInput>;

export const ZPayInvoiceInput = z.strictObject({
  id: zPathId('inv', 'Invoice'),
  payment_method: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe(
      'A payment method of the organization (`pm_…`) to charge instead of the default one, for this payment ' +
        'only (the default stays as it is); one that is not of the organization is 404',
    ),
});
export type TPayInvoiceInput = z.infer<typeof ZPayInvoiceInput>;

export const ZListInvoicesInput = z
  .object({
    ...cursorQueryShape,
    status: z.enum(INVOICE_STATUSES).optional().describe('Only invoices in this status'),
  })
  .prefault({});
export type TListInvoicesInput = z.infer<typeof ZListInvoicesInput>;

// ---------- outputs ----------

const ZLimit = z.union([z.number().int(), z.literal('unlimited')]);

export const ZPlan = z
  .object({
    id: ZPlanId,
    name: z.string(),
    price: ZMoney.describe('Price of one period'),
    currency: z.literal('usd'),
    interval: z.literal('month'),
    popular: z.boolean(),
    features: z.object({
      vpn_connections: ZLimit,
      databases: ZLimit,
      hosting_sites: ZLimit,
      api_calls: ZLimit.describe('API calls per month'),
      support: z.enum(['community', 'priority', 'dedicated']),
      sso: z.boolean().optional(),
      advanced_security: z.boolean().optional(),
    }),
  })
  .meta({ id: 'Plan' });

export const ZListPlansOutput = okResponse({ plans: z.array(ZPlan) });
export type TListPlansOutput = z.infer<typeof ZListPlansOutput>;

export const ZSubscription = z
  .object({
    id: z.string().describe('`sub_…`'),
    plan: ZPlanId,
    status: z
      .enum(SUBSCRIPTION_STATUSES)
      .describe('`active`; `past_due` while a renewal invoice is unpaid; `canceled`'),
    current_period_start: ZTimestamp,
    current_period_end: ZTimestamp,
    cancel_at_period_end: z.boolean(),
    canceled_at: ZNullableTimestamp,
    trial_end: ZNullableTimestamp.describe('Always null: there are no trials'),
    default_payment_method: z.string().nullable().describe('`pm_…` charged by renewals, or null'),
    credit_balance: ZMoney.describe('Credit from downgrades, taken off the next invoices (before tax)'),
    created: ZTimestamp,
  })
  .meta({ id: 'Subscription' });
export type TSubscription = z.infer<typeof ZSubscription>;

const ZUsageEntry = z.object({
  current: z.number().int(),
  limit: z
    .number()
    .int()
    .describe(
      'The plan limit; -1 when the plan has no limit (`unlimited`); 0 while the subscription is canceled',
    ),
  unlimited: z.boolean().describe('True when the plan has no limit for this feature'),
  percentage: z.number().describe('current / limit × 100, two decimals; 0 when unlimited'),
});

export const ZSubscriptionUsage = z
  .object({
    vpn_connections: ZUsageEntry,
    databases: ZUsageEntry,
    hosting_sites: ZUsageEntry,
    api_calls: ZUsageEntry.describe('Requests in the current billing period'),
  })
  .meta({ id: 'SubscriptionUsage' });
export type TSubscriptionUsage = z.infer<typeof ZSubscriptionUsage>;

export const ZLineItem = z.object({
  description: z.string(),
  amount: ZMoney.describe('Negative for a credit'),
  quantity: z.number().int(),
  period: z.object({ start: ZTimestamp, end: ZTimestamp }).nullable(),
});

export const ZInvoice = z
  .object({
    id: z.string().nullable().describe('`inv_…`; null in a preview'),
    number: z.string().nullable().describe('`<8-character prefix>-<4-digit sequence>`; null in a preview'),
    subscription_id: z.string(),
    status: z.enum(INVOICE_STATUSES),
    billing_reason: z.enum(BILLING_REASONS),
    currency: z.literal('usd'),
    amount: ZMoney.describe('The sum of the line items'),
    tax: z.object({
      amount: ZMoney.describe('amount × rate / 100, rounded half up'),
      rate: z.number().describe('Percent'),
      jurisdiction: z.string(),
    }),
    total: ZMoney.describe('amount + tax.amount'),
    line_items: z.array(ZLineItem),
    period: z.object({ start: ZTimestamp, end: ZTimestamp }).nullable(),
    created: ZTimestamp,
    due_date: ZTimestamp,
    paid_at: ZNullableTimestamp,
    payment_method: z
      .object({ type: z.literal('card'), last4: z.string(), brand: z.string() })
      .nullable()
      .describe('The card charged (or to be charged)'),
    attempt_count: z.number().int(),
    next_payment_attempt: ZNullableTimestamp.describe(
      'When an open invoice is charged again; null otherwise',
    ),
    hosted_invoice_url: z
      .string()
      .nullable()
      .describe('An HTML page of the invoice, opened without a token (the link expires after 30 days)'),
    pdf_url: z
      .string()
      .nullable()
      .describe('The invoice as a PDF, opened without a token (expires after 30 days)'),
  })
  .meta({ id: 'Invoice' });
export type TInvoice = z.infer<typeof ZInvoice>;

export const ZSubscriptionOutput = okResponse({
  subscription: ZSubscription,
  usage: ZSubscriptionUsage,
});
export type TSubscriptionOutput = z.infer<typeof ZSubscriptionOutput>;

export const ZUpdateSubscriptionOutput = ZSubscriptionOutput.extend({
  invoice: ZInvoice.nullable().describe('The invoice this change issued, or null'),
});
export type TUpdateSubscriptionOutput = z.infer<typeof ZUpdateSubscriptionOutput>;

export const ZInvoiceOutput = okResponse({ invoice: ZInvoice });
export type TInvoiceOutput = z.infer<typeof ZInvoiceOutput>;

export const ZListInvoicesOutput = cursorResponse('invoices', ZInvoice);
export type TListInvoicesOutput = z.infer<typeof ZListInvoicesOutput>;

export const ZPaymentMethod = z
  .object({
    id: z.string().describe('`pm_…`'),
    type: z.literal('card'),
    card: z.object({
      brand: z.string(),
      last4: z.string(),
      exp_month: z.number().int(),
      exp_year: z.number().int(),
    }),
    is_default: z.boolean(),
    created: ZTimestamp,
  })
  .meta({ id: 'PaymentMethod' });
export type TPaymentMethod = z.infer<typeof ZPaymentMethod>;

export const ZPaymentMethodOutput = okResponse({ payment_method: ZPaymentMethod });
export type TPaymentMethodOutput = z.infer<typeof ZPaymentMethodOutput>;

export const ZListPaymentMethodsOutput = okResponse({
  payment_methods: z.array(ZPaymentMethod),
  default_payment_method: z.string().nullable().describe('`pm_…` of the default payment method, or null'),
});
export type TListPaymentMethodsOutput = z.infer<typeof ZListPaymentMethodsOutput>;

export const ZDeletePaymentMethodOutput = okResponse({
  message: z.string(),
  id: z.string(),
});
export type TDeletePaymentMethodOutput = z.infer<typeof ZDeletePaymentMethodOutput>;

const measure = (d: string) => z.number().describe(d);
export const ZUsageReportOutput = okResponse({
  current_period: z.object({ start: ZTimestamp, end: ZTimestamp }),
  usage: z.object({
    vpn: z.object({
      connections: measure('VPN connections now'),
      data_transfer_gb: measure('Traffic of the connections, GB'),
      server_hours: measure('Hours connections were active in the period'),
    }),
    database: z.object({
      instances: measure('Databases now'),
      storage_gb: measure('Storage of their sizes, GB'),
      compute_hours: measure('vCPU hours in the period'),
    }),
    hosting: z.object({
      sites: measure('Sites now'),
      bandwidth_gb: measure('GB served in the period'),
      build_minutes: measure('Build minutes in the period'),
    }),
    api: z.object({
      requests: measure('API requests in the period (whole UTC days)'),
      rate_limit_hits: measure('Requests refused by the burst limit'),
      webhook_deliveries: measure('Webhook deliveries made in the period'),
    }),
  }),
  costs: z.object({
    base_plan: ZMoney,
    overages: ZMoney.describe('Always 0: limits are hard'),
    add_ons: ZMoney.describe('Resources billed by the time they exist (databases), so far in this period'),
    total: ZMoney,
  }),
  currency: z.literal('usd'),
});
export type TUsageReportOutput = z.infer<typeof ZUsageReportOutput>;
