/**
 * Money is integer cents end to end (docs/billing.md, "Billing"); it becomes a number of currency units, with at most two
 * decimals, only in API views. Every function here is exact integer arithmetic.
 */

/** `numerator / denominator` rounded to an integer, halves away from zero ("half up" on the magnitude). */
export function divRoundHalfUp(numerator: number, denominator: number): number {
  if (!Number.isSafeInteger(numerator) || !Number.isSafeInteger(denominator) || denominator <= 0) {
    throw new RangeError(`divRoundHalfUp(${numerator}, ${denominator}): integers and a positive denominator`);
  }
  const magnitude = Math.floor((2 * Math.abs(numerator) + denominator) / (2 * denominator));
  return numerator < 0 && magnitude !== 0 ? -magnitude : magnitude;
}

/** Cents as currency units: 2633 → 26.33 (the nearest double prints with at most two decimals). */
export function toUnits(cents: number): number {
  return cents / 100;
}

/** Whole currency units (plan prices) as cents. */
export function unitsToCents(units: number): number {
  return Math.round(units * 100);
}

/**
 * The part of `priceCents` that `seconds` of a period of `periodSeconds` are worth, rounded half up to the cent:
 * the proration rule of one line.
 */
export function prorate(priceCents: number, seconds: number, periodSeconds: number): number {
  if (seconds < 0 || seconds > periodSeconds) throw new RangeError('seconds outside the period');
  return divRoundHalfUp(priceCents * seconds, periodSeconds);
}

/** TAX_RATE (percent, up to three decimals) as thousandths of a percent, so the tax is integer arithmetic. */
export function rateMilli(ratePercent: number): number {
  return Math.round(ratePercent * 1000);
}

/** `amount × rate / 100` rounded half up to the cent. */
export function taxCents(amountCents: number, ratePercent: number): number {
  return divRoundHalfUp(amountCents * rateMilli(ratePercent), 100_000);
}

export interface Proration {
  /** The unused time of the old plan, negative (zero at the last instant). */
  creditCents: number;
  /** The rest of the period on the new plan. */
  chargeCents: number;
  remainingSeconds: number;
  periodSeconds: number;
}

/**
 * Proration of a plan change at `now` within `[start, end)`, to the second: the whole seconds left in the period
 * (`end - now`, a started second counting as used) are credited at the old price and charged at the new one, each
 * line rounded half up on its own.
 */
export function prorationFor(
  oldPriceCents: number,
  newPriceCents: number,
  period: { start: Date; end: Date },
  now: Date,
): Proration {
  const periodSeconds = Math.round((period.end.getTime() - period.start.getTime()) / 1000);
  const elapsed = Math.ceil((now.getTime() - period.start.getTime()) / 1000);
  const remainingSeconds = Math.min(periodSeconds, Math.max(0, periodSeconds - elapsed));
  return {
    creditCents: 0 - prorate(oldPriceCents, remainingSeconds, periodSeconds) || 0,
    chargeCents: prorate(newPriceCents, remainingSeconds, periodSeconds),
    remainingSeconds,
    periodSeconds,
  };
}
