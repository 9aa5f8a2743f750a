import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import type { AppDeps } from '../../kit/deps.js';

/**
 * Counts what the edge serves (edge.ts), per site and minute, in memory, and adds it to `hosting_edge_traffic` every
 * {@link FLUSH_MS} (one upsert per site and minute, so every process's counts add up). `metrics.requests_24h` and
 * `bandwidth_24h` of sites built for real read the table (edgeTraffic24h).
 */
const FLUSH_MS = 2000;

/** What this process's edge served and has not written yet (`runtimeOf(deps, 'hosting').traffic`). */
export interface EdgeTrafficCounters {
  pending: Map<string, { requests: number; bytes: number }>;
  timer: NodeJS.Timeout | undefined;
}

export function newEdgeTrafficCounters(): EdgeTrafficCounters {
  return { pending: new Map(), timer: undefined };
}

function counters(deps: AppDeps): EdgeTrafficCounters {
  return runtimeOf(deps, 'hosting').traffic;
}

export function recordEdgeTraffic(deps: AppDeps, siteId: string, requests: number, bytes: number): void {
  const c = counters(deps);
  const minute = Math.floor(Date.now() / 60_000) * 60_000;
  const key = `${siteId} ${minute}`;
  const v = c.pending.get(key);
  if (v) {
    v.requests += requests;
    v.bytes += bytes;
  } else c.pending.set(key, { requests, bytes });
  c.timer ??= setTimeout(() => void flushEdgeTraffic(deps), FLUSH_MS).unref();
}

/** Adds what was counted to the table (the edge's stop and tests call it too). */
export async function flushEdgeTraffic(deps: AppDeps): Promise<void> {
  const c = counters(deps);
  if (c.timer) clearTimeout(c.timer);
  c.timer = undefined;
  if (c.pending.size === 0) return;
  const rows = [...c.pending.entries()].map(([key, v]) => {
    const [siteId, minute] = key.split(' ');
    return { siteId: siteId!, minute: new Date(Number(minute)), requests: v.requests, bytes: v.bytes };
  });
  c.pending.clear();
  try {
    await repositoryOf(deps, 'hosting').addEdgeTraffic(rows);
  } catch (err) {
    deps.log.warn({ err }, 'could not record edge traffic');
  }
}

/** Requests and bytes the edge served for a site in the 24 hours before `now`. */
export async function edgeTraffic24h(
  deps: AppDeps,
  siteId: string,
  now: Date,
): Promise<{ requests: number; bytes: number }> {
  return repositoryOf(deps, 'hosting').edgeTrafficSince(siteId, new Date(now.getTime() - 86_400_000));
}
