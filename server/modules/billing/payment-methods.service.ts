import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import type { ActorContext } from '../../kit/deps.js';
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
import { recordSubscriptionUpdated, retryInvoice } from './invoicing.js';

export async function listPaymentMethods(ctx: ActorContext): Promise<TListPaymentMethodsOutput> {
  const rows = await repositoryOf(ctx.deps, 'billing').listPaymentMethods(ctx.em, ctx.actor);
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
  const card = await runtimeOf(ctx.deps, 'billing').driver.attach(input.payment_method);
  if (!card) {
    throw validation(
      'payment_method',
      'Unknown payment method token; with the simulated processor use pm_card_visa, pm_card_mastercard, ' +
        'pm_card_amex or pm_card_chargeDeclined',
    );
  }
  const orgId = ctx.actor.organizationId;
  const repository = repositoryOf(ctx.deps, 'billing');
  const pm = await repository.transaction(ctx.em, async (tx) => {
    const now = ctx.deps.clock.now();
    const locked = await repository.lockSubscription(tx, orgId);
    const current = await repository.defaultPaymentMethod(tx, orgId);
    const makeDefault = !current || input.set_as_default === true;
    if (current && makeDefault) {
      current.isDefault = false;
      await repository.flush(tx);
    }
    const created = repository.createPaymentMethod(tx, {
      id: newId('pm'),
      now,
      organizationId: orgId,
      brand: card.brand,
      last4: card.last4,
      expMonth: card.expMonth,
      expYear: card.expYear,
      processorRef: card.processorRef,
      isDefault: makeDefault,
    });
    await repository.flush(tx);
    const chargeTo = makeDefault ? created : current;
    if (makeDefault) await recordSubscriptionUpdated(tx, ctx.deps, locked, now, created.id);
    // Unpaid invoices are charged again at once (to the default card), without moving their retry schedule.
    const open = await repository.openInvoices(tx, orgId);
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
  const repository = repositoryOf(ctx.deps, 'billing');
  await repository.transaction(ctx.em, async (tx) => {
    const pm = await repository.paymentMethodInScopeOrThrow(tx, ctx.actor, input.id);
    const { sub } = await repository.lockSubscription(tx, orgId);
    if (pm.isDefault) {
      const others = await repository.countOtherPaymentMethods(tx, orgId, pm.id);
      if (others > 0) {
        throw conflict('This is the default payment method: make another one the default first');
      }
      if (sub.status !== 'canceled') {
        throw conflict('The subscription is paid with this payment method: add another card first');
      }
    }
    repository.removePaymentMethod(tx, pm);
  });
  return { success: true, message: 'Payment method removed', id: input.id };
}
