import type { AppDeps } from '../../kit/deps.js';
import { SimulatedBillingDriver } from './simulated-billing.driver.js';

/** A card on file at the processor, as attached from a token of its card form. */
export interface AttachedCard {
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
  /** The processor's reference of the card, used to charge it. */
  processorRef: string;
}

export interface ChargeRequest {
  processorRef: string;
  amountCents: number;
  currency: 'usd';
  /**
   * The same key always yields the same outcome and at most one charge (as Stripe's Idempotency-Key): a renewal
   * retried after a crash presents the key of its first attempt.
   */
  idempotencyKey: string;
  description: string;
}

export type ChargeResult = { status: 'succeeded'; chargeId: string } | { status: 'declined'; reason: string };

/**
 * The card processor (conventions: no real one is reachable, so a simulated driver stands in, as Stripe's test
 * mode does). `attach` turns a token from the processor's card form into a card on file; `charge` charges it.
 */
export interface BillingDriver {
  /** The card behind `token`, or null when the processor does not know the token. */
  attach(token: string): Promise<AttachedCard | null>;
  charge(request: ChargeRequest): Promise<ChargeResult>;
}

const drivers = new WeakMap<AppDeps, BillingDriver>();

/** The card processor of this process: the simulated one unless a test installed another. */
export function billingDriver(deps: AppDeps): BillingDriver {
  let d = drivers.get(deps);
  if (!d) {
    d = new SimulatedBillingDriver();
    drivers.set(deps, d);
  }
  return d;
}

/** Replaces the card processor of a process (tests: a processor that fails in the middle of a renewal). */
export function useBillingDriver(deps: AppDeps, driver: BillingDriver): void {
  drivers.set(deps, driver);
}
