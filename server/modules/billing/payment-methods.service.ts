import type { ActorContext } from '../../kit/deps.js';
import { findScopedOrThrow, inOrganization } from '../../access/scope.js';
import { conflict, validation } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { toPaymentMethodDto } from './billing.dto.js';
import type {
  TAddPaymentMethodInput,
  TDeletePaymentMethodOutput,
  TListPaymentMethodsOutput,
  TPaymentMethodIdInput,
  TPaymentMethodOutput,
} from './billing.schema.js';
import { Invoice } from './invoice.entity.js';
import {
  findDefaultPaymentMethod,
  lockSubscription,
  recordSubscriptionUpdated,
  retryInvoice,
} from './invoicing.js';
import { PaymentMethod } from './payment-method.entity.js';

export async function listPaymentMethods(ctx: ActorContext): Promise<TListPaymentMethodsOutput> {
  const rows = await ctx.em.find(PaymentMethod, inOrganization(ctx.actor), {
    orderBy: { createdAt: 'desc', id: 'desc' },
  });
  return {
    success: true,
    payment_methods: rows.map(toPaymentMethodDto),
    default_payment_method: rows.find((r) => r.isDefault)?.id ?? null,
  };
}

/**
 * Attaches a card from a processor token. The first card, or one added with `set_as_default`, becomes the
 * default; open invoices of the organization are then charged again at once to the default card.
 */
export async function addPaymentMethod(
  ctx: ActorContext,
  input: TAddPaymentMethodInput,
): Promise<TPaymentMethodOutput> {
  const card = await ctx.deps.modules.billing.driver.attach(input.payment_method);
  if (!card) {
    throw validation(
      'payment_method',
      'Unknown payment method token; with the simulated processor use pm_card_visa, pm_card_mastercard, ' +
        'pm_card_amex or pm_card_chargeDeclined',
    );
  }
  const orgId = ctx.actor.organizationId;
  const pm = await ctx.em.transactional(async (tx) => {
    const now = ctx.deps.clock.now();
    const locked = await lockSubscription(tx, orgId);
    const current = await findDefaultPaymentMethod(tx, orgId);
    const makeDefault = !current || input.set_as_default === true;
    if (current && makeDefault) {
      current.isDefault = false;
      await tx.flush();
    }
    const created = tx.create(PaymentMethod, {
      id: newId('pm'),
      createdAt: now,
      updatedAt: now,
      organization: orgId,
      type: 'card',
      brand: card.brand,
      last4: card.last4,
      expMonth: card.expMonth,
      expYear: card.expYear,
      processorRef: card.processorRef,
      isDefault: makeDefault,
    });
    await tx.flush();
    const chargeTo = makeDefault ? created : current;
    if (makeDefault) await recordSubscriptionUpdated(tx, ctx.deps, locked, now, created.id);
    // Unpaid invoices are charged again at once (to the default card), without moving their retry schedule.
    const open = await tx.find(
      Invoice,
      { organization: orgId, status: 'open' },
      { orderBy: { createdAt: 'asc' } },
    );
    for (const invoice of open) await retryInvoice(tx, ctx.deps, locked, invoice, chargeTo, now, false);
    return created;
  });
  return { success: true, payment_method: toPaymentMethodDto(pm) };
}

/**
 * Removes a card. The default one may go only when it is the last card and the subscription is canceled: a
 * subscription that renews needs a card to charge.
 */
export async function deletePaymentMethod(
  ctx: ActorContext,
  input: TPaymentMethodIdInput,
): Promise<TDeletePaymentMethodOutput> {
  const orgId = ctx.actor.organizationId;
  await ctx.em.transactional(async (tx) => {
    const pm = await findScopedOrThrow(tx, PaymentMethod, input.id, inOrganization(ctx.actor), {
      prefix: 'pm',
      what: 'Payment method',
    });
    const { sub } = await lockSubscription(tx, orgId);
    if (pm.isDefault) {
      const others = await tx.count(PaymentMethod, { organization: orgId, id: { $ne: pm.id } });
      if (others > 0) {
        throw conflict('This is the default payment method: make another one the default first');
      }
      if (sub.status !== 'canceled') {
        throw conflict('The subscription is paid with this payment method: add another card first');
      }
    }
    tx.remove(pm);
  });
  return { success: true, message: 'Payment method removed', id: input.id };
}
