import { repositoryOf } from '../../kit/runtime.js';
import type { ActorContext } from '../../kit/deps.js';
import { notFound } from '../../lib/errors.js';
import { isId } from '../../lib/ids.js';
import { toInvoiceDto } from './billing.dto.js';
import type {
  TInvoiceIdInput,
  TInvoiceOutput,
  TListInvoicesInput,
  TListInvoicesOutput,
  TPayInvoiceInput,
} from './billing.schema.js';
import { retryInvoice } from './invoicing.js';
import { assertCanTransition } from './invoice-state.js';
import { chargeDeclined } from './subscription.service.js';

export async function listInvoices(
  ctx: ActorContext,
  input: TListInvoicesInput,
): Promise<TListInvoicesOutput> {
  const page = await repositoryOf(ctx.deps, 'billing').listInvoices(ctx.em, ctx.actor, input.status, input);
  const now = ctx.deps.clock.now();
  return {
    success: true,
    invoices: page.items.map((i) => toInvoiceDto(ctx.deps, i, now)),
    total: page.total,
    has_more: page.has_more,
  };
}

export async function getInvoice(ctx: ActorContext, input: TInvoiceIdInput): Promise<TInvoiceOutput> {
  const invoice = await repositoryOf(ctx.deps, 'billing').invoiceInScopeOrThrow(ctx.em, ctx.actor, input.id);
  return { success: true, invoice: toInvoiceDto(ctx.deps, invoice, ctx.deps.clock.now()) };
}

/**
 * Charges an open invoice now to the default payment method, or to `payment_method` (a card of the organization,
 * else 404; the default is left as it is). Declined → 402 `PAYMENT_FAILED` (the invoice stays open and its retry
 * schedule goes on); any status but `open` → 409.
 */
export async function payInvoice(ctx: ActorContext, input: TPayInvoiceInput): Promise<TInvoiceOutput> {
  const orgId = ctx.actor.organizationId;
  if (input.payment_method !== undefined && !isId('pm', input.payment_method))
    throw notFound('Payment method');
  const repository = repositoryOf(ctx.deps, 'billing');
  const result = await repository.transaction(ctx.em, async (tx) => {
    const now = ctx.deps.clock.now();
    // Every writer of the organization's invoices holds its subscription's lock: read the invoice under it.
    const locked = await repository.lockSubscription(tx, orgId);
    const found = await repository.invoiceInScopeOrThrow(tx, ctx.actor, input.id);
    assertCanTransition(found, 'paid');
    const defaultPm = await repository.defaultPaymentMethod(tx, orgId);
    let pm = defaultPm;
    if (input.payment_method !== undefined && input.payment_method !== defaultPm?.id) {
      pm = await repository.findPaymentMethod(tx, orgId, input.payment_method);
      if (!pm) throw notFound('Payment method');
    }
    const outcome = await retryInvoice(tx, ctx.deps, locked, found, pm, now, false, defaultPm?.id ?? null);
    return { invoice: found, outcome };
  });
  if (result.outcome && !result.outcome.paid) throw chargeDeclined(result.outcome.reason);
  return { success: true, invoice: toInvoiceDto(ctx.deps, result.invoice, ctx.deps.clock.now()) };
}
