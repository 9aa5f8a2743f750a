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
 * mode does). `attach` turns a token from the processor's card form into a card on file; `charge` charges it. The
 * process's processor is `runtimeOf(deps, 'billing').driver`, chosen by the module's `create` (billing.module.ts).
 */
export interface BillingDriver {
  /** The card behind `token`, or null when the processor does not know the token. */
  attach(token: string): Promise<AttachedCard | null>;
  charge(request: ChargeRequest): Promise<ChargeResult>;
}
