import { DELIVERY_STATUSES, type DeliveryStatus } from './webhooks.constants.js';

/**
 * The life of a webhook delivery (docs/webhooks.md, "Delivery states"): the one place that says which status may
 * follow which. A delivery is written `pending` (an event, a redelivery, a recovery) or, for a test, `success` or
 * `failed` at once. Its status then changes only in SQL (the outcomes of attempts, the deliveries of a webhook no
 * longer active), whose `where` takes the statuses allowed from this table ({@link movesSql}, {@link statusesBefore}).
 */

export { DELIVERY_STATUSES, type DeliveryStatus };

/** Which status may follow which: a pending delivery is retried (pending again), succeeds or fails; nothing else. */
export const WEBHOOK_DELIVERY_TRANSITIONS: Readonly<Record<DeliveryStatus, readonly DeliveryStatus[]>> = {
  pending: ['pending', 'success', 'failed'],
  success: [],
  failed: [],
};

export function canTransition(from: DeliveryStatus, to: DeliveryStatus): boolean {
  return WEBHOOK_DELIVERY_TRANSITIONS[from].includes(to);
}

/** Throws (the worker fails loudly) unless a delivery in `d.status` may move to `to`; changes nothing. */
export function assertCanTransition(d: { status: DeliveryStatus }, to: DeliveryStatus): void {
  if (!canTransition(d.status, to)) {
    throw new Error(
      `A webhook delivery cannot move from ${d.status} to ${to} (WEBHOOK_DELIVERY_TRANSITIONS)`,
    );
  }
}

/** Moves `d` to `to`, or throws when the state machine does not allow it. Only the status. */
export function transition(d: { status: DeliveryStatus }, to: DeliveryStatus): void {
  assertCanTransition(d, to);
  d.status = to;
}

/** The statuses that may move to `to`, in the order of DELIVERY_STATUSES. */
export function statusesBefore(to: DeliveryStatus): DeliveryStatus[] {
  return DELIVERY_STATUSES.filter((from) => canTransition(from, to));
}

/** A SQL list of statuses, `('a', 'b')` (the statuses are fixed words: nothing to escape). */
export function statusListSql(statuses: readonly DeliveryStatus[]): string {
  return `(${statuses.map((s) => `'${s}'`).join(', ')})`;
}

/** Every move of the table as SQL row values, `(('pending', 'success'), …)`: `(from, to) in <this>` allows them. */
export function movesSql(): string {
  const moves = DELIVERY_STATUSES.flatMap((from) =>
    WEBHOOK_DELIVERY_TRANSITIONS[from].map((to) => `('${from}', '${to}')`),
  );
  return `(${moves.join(', ')})`;
}
