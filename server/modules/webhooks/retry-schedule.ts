/**
 * When the next attempt is due after `attemptsMade` failed attempts, or undefined when the schedule is spent
 * (a schedule of N delays allows N + 1 attempts). Each delay gets ±10 % jitter so that deliveries that failed
 * together (a receiver outage) do not all come back at the same instant.
 */
export function nextRetryDelayMs(
  scheduleMs: readonly number[],
  attemptsMade: number,
  random: () => number = Math.random,
): number | undefined {
  if (attemptsMade < 1 || attemptsMade > scheduleMs.length) return undefined;
  const base = scheduleMs[attemptsMade - 1]!;
  return Math.round(base * (0.9 + 0.2 * random()));
}
