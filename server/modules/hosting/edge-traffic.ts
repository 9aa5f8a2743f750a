import type { AppDeps } from '../../kit/deps.js';

/**
 * Counts what the edge serves (edge.ts), per site and minute, in memory, and adds it to `hosting_edge_traffic` every
 * {@link FLUSH_MS} (one upsert per site and minute, so every process's counts add up). `metrics.requests_24h` and
 * `bandwidth_24h` of sites built for real read the table (edgeTraffic24h).
 */
const FLUSH_MS = 2000;

/** What this process's edge served and has not written yet (`deps.modules.hosting.traffic`). */
export interface EdgeTrafficCounters {
  pending: Map<string, { requests: number; bytes: number }>;
  timer: NodeJS.Timeout | undefined;
}

export function newEdgeTrafficCounters(): EdgeTrafficCounters {
  return { pending: new Map(), timer: undefined };
}

function counters(deps: AppDeps): EdgeTrafficCounters {
  return deps.modules.hosting.traffic;
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
  const rows = [...c.pending.entries()];
  c.pending.clear();
  const values: unknown[] = [];
  for (const [key, v] of rows) {
    const [siteId, minute] = key.split(' ');
    values.push(siteId, new Date(Number(minute)), v.requests, v.bytes);
  }
  try {
    // Sites deleted meanwhile are left out (their rows went with them).
    await deps.db.orm.em.fork().execute(
      `insert into "hosting_edge_traffic" ("site_id", "minute", "requests", "bytes")
       select v.site_id, v.minute::timestamptz, v.requests::bigint, v.bytes::bigint
         from (values ${rows.map(() => '(?, ?, ?, ?)').join(', ')}) as v(site_id, minute, requests, bytes)
        where exists (select 1 from "hosting_sites" s where s."id" = v.site_id)
       on conflict ("site_id", "minute") do update
         set "requests" = "hosting_edge_traffic"."requests" + excluded."requests",
             "bytes" = "hosting_edge_traffic"."bytes" + excluded."bytes"`,
      values,
    );
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
  const rows = await deps.db.orm.em
    .fork()
    .execute<{ requests: string | number | null; bytes: string | number | null }[]>(
      `select sum("requests") as "requests", sum("bytes") as "bytes" from "hosting_edge_traffic"
        where "site_id" = ? and "minute" > ?`,
      [siteId, new Date(now.getTime() - 86_400_000)],
    );
  return { requests: Number(rows[0]?.requests ?? 0), bytes: Number(rows[0]?.bytes ?? 0) };
}
