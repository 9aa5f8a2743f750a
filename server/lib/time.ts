const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses one duration such as `500ms`, `5s`, `5m`, `2h`, `1d`. A bare number is milliseconds. */
export function parseDuration(input: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(input);
  if (!m) return undefined;
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 'ms']!);
}

/** Parses `1s,2s,3s` into milliseconds; undefined when any part is not a duration. */
export function parseDurationList(input: string): number[] | undefined {
  const parts = input.split(',').map((p) => p.trim());
  if (parts.length === 0 || parts.some((p) => p === '')) return undefined;
  const out = parts.map(parseDuration);
  return out.every((n): n is number => n !== undefined) ? out : undefined;
}

/** A clock that tests can replace. */
export interface Clock {
  now(): Date;
}
export const systemClock: Clock = { now: () => new Date() };

/** ISO 8601 UTC with milliseconds, or null. */
export function iso(d: Date | null | undefined): string | null {
  return d ? d.toISOString() : null;
}

/** Human readable duration: `2d 3h 4m`, `5m 10s`, `42s`. */
export function humanDuration(ms: number): string {
  const total = Math.max(0, Math.floor(ms / 1000));
  const d = Math.floor(total / 86400);
  const h = Math.floor((total % 86400) / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (d > 0) return `${d}d ${h}h ${m}m`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s}s`;
  return `${s}s`;
}
