import type { Config } from '../../config.js';

/** `anchor` plus `months` calendar months (UTC), the day clamped to the target month's last day (Jan 31 → Feb 28). */
export function addMonthsClamped(anchor: Date, months: number): Date {
  const y = anchor.getUTCFullYear();
  const m = anchor.getUTCMonth() + months;
  const lastDay = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  return new Date(
    Date.UTC(
      y,
      m,
      Math.min(anchor.getUTCDate(), lastDay),
      anchor.getUTCHours(),
      anchor.getUTCMinutes(),
      anchor.getUTCSeconds(),
      anchor.getUTCMilliseconds(),
    ),
  );
}

/**
 * The end of the period that starts at `start`: with calendar months, the first anchor-aligned date after `start`
 * (anchor + k × months, so periods never drift: Jan 31, Feb 28, Mar 31, ...); with a fixed length, `start + length`.
 */
export function periodEndAfter(period: Config['billing']['period'], anchor: Date, start: Date): Date {
  if ('ms' in period) return new Date(start.getTime() + period.ms);
  const monthsBetween =
    (start.getUTCFullYear() - anchor.getUTCFullYear()) * 12 + (start.getUTCMonth() - anchor.getUTCMonth());
  let k = Math.max(1, Math.floor(monthsBetween / period.months));
  while (addMonthsClamped(anchor, k * period.months) <= start) k++;
  while (k > 1 && addMonthsClamped(anchor, (k - 1) * period.months) > start) k--;
  return addMonthsClamped(anchor, k * period.months);
}

/** Periods start on whole seconds: proration counts seconds. */
export function wholeSecond(d: Date): Date {
  return new Date(Math.floor(d.getTime() / 1000) * 1000);
}

/** How many months a period is billed as (the plan's price is per period; add-ons' prices are monthly). */
export function periodMonths(period: Config['billing']['period']): number {
  return 'months' in period ? period.months : 1;
}
