import { conflict } from '../../lib/errors.js';
import { SUBSCRIPTION_STATUSES, type SubscriptionStatus } from './billing.constants.js';

/**
 * The life of a subscription (docs/billing.md, "States"): the one place that says which status may follow which.
 * Every write of a subscription's status goes through {@link transition} (by `setStatus` of invoicing.ts, which also
 * mirrors it on the organization), which refuses anything else.
 */

export { SUBSCRIPTION_STATUSES, type SubscriptionStatus };

/** Which status may follow which. */
export const SUBSCRIPTION_TRANSITIONS: Readonly<Record<SubscriptionStatus, readonly SubscriptionStatus[]>> = {
  active: ['past_due', 'canceled'],
  past_due: ['active', 'canceled'],
  canceled: ['active'],
};

export function canTransition(from: SubscriptionStatus, to: SubscriptionStatus): boolean {
  return SUBSCRIPTION_TRANSITIONS[from].includes(to);
}

/** 409 CONFLICT ("The subscription is <status>: it cannot become <to>") unless `sub` may move to `to`. */
export function assertCanTransition(sub: { status: SubscriptionStatus }, to: SubscriptionStatus): void {
  if (!canTransition(sub.status, to))
    throw conflict(`The subscription is ${sub.status}: it cannot become ${to}`);
}

/** Moves `sub` to `to`, or throws 409 CONFLICT when the state machine does not allow it. Only the status. */
export function transition(sub: { status: SubscriptionStatus }, to: SubscriptionStatus): void {
  assertCanTransition(sub, to);
  sub.status = to;
}
