import { createHash } from 'node:crypto';

/**
 * Simulated traffic of a site (no real edge network exists, docs/sites.md "Sites and deployments"). It is a function of the site's id
 * and of time alone, so every reader (the detail view's `metrics`, the usage report's `hosting.bandwidth_gb`) sees
 * the same figures, and figures for adjacent windows add up exactly.
 *
 * From the moment a deployment of the site first went live (`live_since`) until the site is deleted, requests
 * arrive at a rate drawn from the id (between about 1,700 and 130,000 a day), following the time of day (±60 % over
 * 24 hours, with a phase drawn from the id). Each request weighs the site's average response size (8 to 128 KB,
 * also drawn from the id). The requests of a window `[a, b)` are `R(b) − R(a)` where `R` is the whole number of
 * requests since the epoch: counts are whole and additive.
 */

const DAY_S = 86_400;
const SWING = 0.6;

export interface TrafficProfile {
  /** Mean requests per second. */
  rate: number;
  /** Phase of the daily cycle, in days. */
  phase: number;
  /** Bytes per request. */
  bytesPerRequest: number;
  /** Simulated availability, 0.999 to 1. */
  availability: number;
}

const profiles = new Map<string, TrafficProfile>();

export function trafficProfile(siteId: string): TrafficProfile {
  let p = profiles.get(siteId);
  if (!p) {
    const h = createHash('sha256').update(`hosting-traffic:${siteId}`).digest();
    const u = (i: number) => h.readUInt32BE(i * 4) / 2 ** 32;
    p = {
      rate: 0.02 + 1.5 * u(0) ** 2,
      phase: u(1),
      bytesPerRequest: 8_000 + Math.floor(u(2) * 120_000),
      availability: 0.999 + Math.floor(u(3) * 101) / 100_000,
    };
    if (profiles.size > 10_000) profiles.clear();
    profiles.set(siteId, p);
  }
  return p;
}

/** Whole requests from the epoch to `t` (the integral of the rate, floored). */
function requestsUntil(p: TrafficProfile, t: Date): number {
  const s = t.getTime() / 1000;
  const angle = 2 * Math.PI * (s / DAY_S + p.phase);
  return Math.floor(p.rate * (s - (SWING * DAY_S * Math.cos(angle)) / (2 * Math.PI)));
}

/** Requests and bytes served in `[from, to)` by a site that serves from `liveSince` to `until` (null: still). */
export function trafficBetween(
  siteId: string,
  window: { from: Date; to: Date },
  life: { liveSince: Date | null; until?: Date | null },
): { requests: number; bytes: number } {
  if (!life.liveSince) return { requests: 0, bytes: 0 };
  const from = Math.max(window.from.getTime(), life.liveSince.getTime());
  const to = Math.min(window.to.getTime(), life.until ? life.until.getTime() : Infinity);
  if (!(to > from)) return { requests: 0, bytes: 0 };
  const p = trafficProfile(siteId);
  const requests = Math.max(0, requestsUntil(p, new Date(to)) - requestsUntil(p, new Date(from)));
  return { requests, bytes: requests * p.bytesPerRequest };
}

/** `1.24 GB`, `312.5 MB`, `0 B` (decimal units, as `bandwidth_gb` counts). */
export function humanBytes(bytes: number): string {
  if (bytes <= 0) return '0 B';
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  let v = bytes;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(2)} ${units[i]}`;
}

/** The detail view's `metrics`, as of `now`. */
export function siteMetrics(
  siteId: string,
  liveSince: Date | null,
  now: Date,
): { requests_24h: number; bandwidth_24h: string; uptime: string } {
  const day = { from: new Date(now.getTime() - DAY_S * 1000), to: now };
  const t = trafficBetween(siteId, day, { liveSince });
  const uptime =
    liveSince && liveSince < now ? `${(trafficProfile(siteId).availability * 100).toFixed(2)}%` : '0%';
  return { requests_24h: t.requests, bandwidth_24h: humanBytes(t.bytes), uptime };
}
