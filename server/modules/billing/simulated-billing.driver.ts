import { createHash, randomBytes } from 'node:crypto';
import type { AttachedCard, BillingDriver, ChargeRequest, ChargeResult } from './billing.driver.js';

/** The simulated processor's test tokens (docs/billing.md, "Billing"). */
export const TEST_CARDS: Record<string, Omit<AttachedCard, 'processorRef'> & { declines: boolean }> = {
  pm_card_visa: { brand: 'visa', last4: '4242', expMonth: 12, expYear: 2034, declines: false },
  pm_card_mastercard: { brand: 'mastercard', last4: '4444', expMonth: 12, expYear: 2034, declines: false },
  pm_card_amex: { brand: 'amex', last4: '8431', expMonth: 12, expYear: 2034, declines: false },
  pm_card_chargeDeclined: { brand: 'visa', last4: '0002', expMonth: 12, expYear: 2034, declines: true },
};

/**
 * Stripe's test mode, simulated: the test tokens attach as cards; every charge succeeds except on
 * `pm_card_chargeDeclined`, which attaches and declines every charge. Stateless: the outcome and the charge id
 * follow from the card and the idempotency key alone, so a retried request gets the same answer.
 */
export class SimulatedBillingDriver implements BillingDriver {
  async attach(token: string): Promise<AttachedCard | null> {
    const card = Object.hasOwn(TEST_CARDS, token) ? TEST_CARDS[token] : undefined;
    if (!card) return null;
    return {
      brand: card.brand,
      last4: card.last4,
      expMonth: card.expMonth,
      expYear: card.expYear,
      processorRef: `card_sim_${token.slice('pm_card_'.length)}_${randomBytes(8).toString('hex')}`,
    };
  }

  async charge(request: ChargeRequest): Promise<ChargeResult> {
    const token = /^card_sim_([A-Za-z]+)_/.exec(request.processorRef)?.[1];
    const key = `pm_card_${token}`;
    const card = token && Object.hasOwn(TEST_CARDS, key) ? TEST_CARDS[key] : undefined;
    if (!card) return { status: 'declined', reason: 'Unknown card' };
    if (card.declines) return { status: 'declined', reason: 'Your card was declined' };
    const id = createHash('sha256').update(request.idempotencyKey).digest('hex').slice(0, 24);
    return { status: 'succeeded', chargeId: `ch_sim_${id}` };
  }
}
