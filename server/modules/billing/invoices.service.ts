import { findScopedOrThrow, inOrganization } from '../../access/scope.js';
import { INVOICE_STATUSES } from './billing.constants.js';
import { findCursorPage } from '../../db/pagination.js';
import type { ActorContext } from '../../kit/deps.js';
import { conflict } from '../../lib/errors.js';
import { toInvoiceDto } from './billing.dto.js';
import type {
  TInvoiceIdInput,
  TInvoiceOutput,
  TListInvoicesInput,
  TListInvoicesOutput,
} from './billing.schema.js';
import { Invoice } from './invoice.entity.js';
import { findDefaultPaymentMethod, lockSubscription, retryInvoice } from './invoicing.js';
import { chargeDeclined } from './subscription.service.js';

export async function listInvoices(
  ctx: ActorContext,
  input: TListInvoicesInput,
): Promise<TListInvoicesOutput> {
  const where: Record<string, string> = { ...inOrganization(ctx.actor) };
  if (input.status) where.status = input.status;
  const page = await findCursorPage(ctx.em, Invoice, where, input, {
    counted: {
      spec: { list: 'invoices', scope: 'organization', dims: [{ key: 'status', values: INVOICE_STATUSES }] },
      filter: where,
    },
  });
  const now = ctx.deps.clock.now();
  return {
    success: true,
    invoices: page.items.map((i) => toInvoiceDto(ctx.deps, i, now)),
    total: page.total,
    has_more: page.has_more,
  };
}

export async function getInvoice(ctx: ActorContext, input: TInvoiceIdInput): Promise<TInvoiceOutput> {
  const invoice = await findScopedOrThrow(ctx.em, Invoice, input.id, inOrganization(ctx.actor), {
    prefix: 'inv',
    what: 'Invoice',
  });
  return { success: true, invoice: toInvoiceDto(ctx.deps, invoice, ctx.deps.clock.now()) };
}

/**
 * Charges an open invoice now to the default payment method. Declined → 402 `PAYMENT_FAILED` (the invoice stays
 * open and its retry schedule goes on); any status but `open` → 409.
 */
export async function payInvoice(ctx: ActorContext, input: TInvoiceIdInput): Promise<TInvoiceOutput> {
  const orgId = ctx.actor.organizationId;
  const result = await ctx.em.transactional(async (tx) => {
    const now = ctx.deps.clock.now();
    // Every writer of the organization's invoices holds its subscription's lock: read the invoice under it.
    const locked = await lockSubscription(tx, orgId);
    const found = await findScopedOrThrow(tx, Invoice, input.id, inOrganization(ctx.actor), {
      prefix: 'inv',
      what: 'Invoice',
    });
    if (found.status !== 'open')
      throw conflict(`The invoice is ${found.status}; only open invoices can be paid`);
    const pm = await findDefaultPaymentMethod(tx, orgId);
    const outcome = await retryInvoice(tx, ctx.deps, locked, found, pm, now, false);
    return { invoice: found, outcome };
  });
  if (result.outcome && !result.outcome.paid) throw chargeDeclined(result.outcome.reason);
  return { success: true, invoice: toInvoiceDto(ctx.deps, result.invoice, ctx.deps.clock.now()) };
}
