import { ZNoQuery } from '../../lib/schema.js';
import { PLAN_IDS, PLANS } from '../../lib/plans.js';
import { router } from '../../trpc/init.js';
import { authedProcedure, requirePermission } from '../../trpc/procedures.js';
import {
  ZAddPaymentMethodInput,
  ZDeletePaymentMethodOutput,
  ZInvoiceIdInput,
  ZInvoiceOutput,
  ZListInvoicesInput,
  ZListInvoicesOutput,
  ZListPaymentMethodsOutput,
  ZListPlansOutput,
  ZPaymentMethodIdInput,
  ZPaymentMethodOutput,
  ZPayInvoiceInput,
  ZPreviewInput,
  ZSubscriptionOutput,
  ZUpdateSubscriptionInput,
  ZUpdateSubscriptionOutput,
  ZUsageReportOutput,
} from './billing.schema.js';
import * as invoices from './invoices.service.js';
import * as paymentMethods from './payment-methods.service.js';
import * as subscription from './subscription.service.js';
import { usageReport } from './usage.service.js';

const tags = ['Billing'];

const plans = router({
  list: authedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/billing/plans',
        tags,
        summary: 'The plans',
        description: 'Every plan with its price per period and its limits (`unlimited` where there is none).',
      },
    })
    .input(ZNoQuery.optional())
    .output(ZListPlansOutput)
    .query(() => ({ success: true as const, plans: PLAN_IDS.map((id) => PLANS[id]) })),
});

const subscriptionRouter = router({
  get: requirePermission('billing:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/billing/subscription',
        tags,
        summary: "The organization's subscription and its usage against the plan",
        description: '`usage.*.limit` is -1 (with `unlimited: true`) where the plan has no limit.',
      },
    })
    .input(ZNoQuery.optional())
    .output(ZSubscriptionOutput)
    .query(({ ctx }) => subscription.getSubscription(ctx)),

  update: requirePermission('billing:write')
    .meta({
      openapi: {
        method: 'PUT',
        path: '/billing/subscription',
        tags,
        summary: 'Change the plan, the default payment method or the cancellation',
        description:
          'A plan change takes effect at once (limits and API quota included). With `proration_behavior: ' +
          'always_invoice` (default) the proration is invoiced and charged now; `create_prorations` adds it to ' +
          'the next renewal; `none` prorates nothing. The same plan changes nothing and issues no invoice. On a ' +
          'canceled subscription, `plan` starts a new period, invoiced and charged at once.',
      },
      errors: {
        PAYMENT_FAILED: '`PAYMENT_FAILED`: the charge was declined; nothing changed (the invoice is void)',
        NOT_FOUND: 'The payment method is not one of the organization',
        CONFLICT:
          'A downgrade below current usage (`details: [{resource, limit, current}]`), or a cancellation change on a canceled subscription',
      },
    })
    .input(ZUpdateSubscriptionInput)
    .output(ZUpdateSubscriptionOutput)
    .mutation(({ ctx, input }) => subscription.updateSubscription(ctx, input)),

  preview: requirePermission('billing:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/billing/subscription/preview',
        tags,
        summary: 'Preview the invoice a plan change would issue',
        description:
          'Lines, tax and total of the change now, without changing anything (`id` and `number` null). A ' +
          'change that `PUT /billing/subscription` would refuse is refused the same way.',
      },
      errors: {
        CONFLICT:
          'A downgrade below current usage (`details: [{resource, limit, current}]`), as the change itself',
      },
    })
    .input(ZPreviewInput)
    .output(ZInvoiceOutput)
    .mutation(({ ctx, input }) => subscription.previewChange(ctx, input)),
});

const paymentMethodsRouter = router({
  list: requirePermission('billing:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/billing/payment-methods',
        tags,
        summary: "The organization's payment methods",
        description:
          'Every card of the organization (brand, last four digits, expiry), the default one first. Card numbers ' +
          'are never stored or shown.',
      },
    })
    .input(ZNoQuery.optional())
    .output(ZListPaymentMethodsOutput)
    .query(({ ctx }) => paymentMethods.listPaymentMethods(ctx)),

  create: requirePermission('billing:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/billing/payment-methods',
        tags,
        summary: 'Add a card from a card-processor token',
        description:
          'The first card becomes the default. Unpaid invoices are charged again at once. Test tokens of the ' +
          'simulated processor: `pm_card_visa`, `pm_card_mastercard`, `pm_card_amex`, `pm_card_chargeDeclined`.',
      },
      errors: { VALIDATION_ERROR: 'Unknown token' },
      successStatus: 201,
      location: '/billing/payment-methods/{payment_method.id}',
    })
    .input(ZAddPaymentMethodInput)
    .output(ZPaymentMethodOutput)
    .mutation(({ ctx, input }) => paymentMethods.addPaymentMethod(ctx, input)),

  delete: requirePermission('billing:write')
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/billing/payment-methods/{id}',
        tags,
        summary: 'Remove a payment method',
        description:
          'Removes a card. The default card can only go when it is the last one and the subscription is canceled.',
      },
      errors: {
        CONFLICT: 'The default payment method while others exist or the subscription is not canceled',
      },
    })
    .input(ZPaymentMethodIdInput)
    .output(ZDeletePaymentMethodOutput)
    .mutation(({ ctx, input }) => paymentMethods.deletePaymentMethod(ctx, input)),
});

const invoicesRouter = router({
  list: requirePermission('billing:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/billing/invoices',
        tags,
        summary: "The organization's invoices",
        description: 'Newest first; cursor paging with `limit` and `starting_after`; `status` filters.',
      },
    })
    .input(ZListInvoicesInput)
    .output(ZListInvoicesOutput)
    .query(({ ctx, input }) => invoices.listInvoices(ctx, input)),

  get: requirePermission('billing:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/billing/invoices/{id}',
        tags,
        summary: 'An invoice (detail view)',
        description:
          'An invoice of the organization with its line items, totals and status, and signed links to its HTML ' +
          'page and PDF (`hosted_invoice_url`, `pdf_url`).',
      },
    })
    .input(ZInvoiceIdInput)
    .output(ZInvoiceOutput)
    .query(({ ctx, input }) => invoices.getInvoice(ctx, input)),

  pay: requirePermission('billing:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/billing/invoices/{id}/pay',
        tags,
        summary: 'Charge an open invoice now',
        description:
          'Charges the default payment method, or the one given as `payment_method` (for this payment only: the ' +
          'default stays). The retry schedule goes on if it is declined.',
      },
      errors: {
        PAYMENT_FAILED: '`PAYMENT_FAILED`: declined (the invoice stays open)',
        NOT_FOUND: 'The invoice, or the payment method, is not one of the organization',
        CONFLICT: 'The invoice is not open',
      },
    })
    .input(ZPayInvoiceInput)
    .output(ZInvoiceOutput)
    .mutation(({ ctx, input }) => invoices.payInvoice(ctx, input)),
});

const usage = router({
  get: requirePermission('billing:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/billing/usage',
        tags,
        summary: 'Usage and costs of the current period',
        description: 'Measures no installed module reports are 0. `overages` is always 0: limits are hard.',
      },
    })
    .input(ZNoQuery.optional())
    .output(ZUsageReportOutput)
    .query(({ ctx }) => usageReport(ctx)),
});

export const billingRouter = router({
  plans,
  subscription: subscriptionRouter,
  paymentMethods: paymentMethodsRouter,
  invoices: invoicesRouter,
  usage,
});
