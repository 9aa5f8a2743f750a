import { measureLoad } from './load.js';
import type { BenchContext } from './plugin.js';
import { freePort, startServerProcess } from './processes.js';
import { fmt } from './report.js';

/**
 * A page list of the server under test against its hand-written baseline (a Fastify + `pg` route doing the same
 * queries and JSON, in a child process on the same database): the baseline's throughput first, while the server
 * under test sits idle, then the server's, with the target ratio of the two. Used by the VPN, databases and hosting
 * list benches.
 */
export async function listAgainstBaseline(
  ctx: BenchContext,
  opts: {
    /** The baseline's process name in messages, e.g. `VPN list baseline`. */
    name: string;
    /** The baseline server's script, e.g. `bench/lib/vpn-baseline-server.ts`. */
    script: string;
    /** The list's path with its query, e.g. `/v1/vpn/connections?page=1&limit=20`. */
    path: string;
    /** The `total` both must answer (the seeded rows). */
    total: number;
    /** Also require the baseline's items under this key to equal the server's, to the byte. */
    sameItems?: string;
    /** Minimum share of the baseline's throughput (0.5). */
    targetRatio?: number;
  },
): Promise<void> {
  const targetRatio = opts.targetRatio ?? 0.5;
  const port = await freePort();
  const baseline = await startServerProcess({
    name: opts.name,
    script: opts.script,
    port,
    env: { PORT: String(port), DATABASE_URL: ctx.databaseUrl, JWT_SECRET: ctx.jwtSecret },
  });
  let base;
  try {
    const probe = await fetch(`${baseline.baseUrl}${opts.path}`, { headers: ctx.headers });
    const body = (await probe.json()) as Record<string, unknown> & { total: number };
    if (probe.status !== 200 || body.total !== opts.total) {
      throw new Error(`baseline answered ${probe.status} with total ${body.total}`);
    }
    if (opts.sameItems) {
      const ours = await ctx.api<Record<string, unknown>>('GET', opts.path);
      if (JSON.stringify(body[opts.sameItems]) !== JSON.stringify(ours.body[opts.sameItems])) {
        throw new Error('the baseline does not answer the same list');
      }
    }
    // The baseline runs while the server under test sits idle, as in the core figures.
    base = await measureLoad({
      url: `${baseline.baseUrl}${opts.path}`,
      headers: ctx.headers,
      connections: ctx.settings.connections,
      durationSec: ctx.settings.durationSec,
      warmupSec: ctx.settings.warmupSec,
    });
  } finally {
    await baseline.stop();
  }
  ctx.report.figure('baseline: Fastify + jsonwebtoken + pg, req/s', base.rps, 'req/s');
  ctx.report.figure('baseline p50', base.p50, 'ms');
  ctx.report.figure('baseline p99', base.p99, 'ms');

  const r = await ctx.load({ path: opts.path });
  const min = targetRatio * base.rps;
  ctx.report.figure(`GET ${opts.path}, ${ctx.settings.connections} connections`, r.rps, 'req/s', {
    target: `≥ ${fmt(min)} req/s (${targetRatio} × baseline)`,
    met: r.rps >= min,
  });
  ctx.report.figure('  share of the baseline', (100 * r.rps) / base.rps, '%', {
    target: `≥ ${targetRatio * 100} %`,
    met: r.rps >= min,
  });
  ctx.report.figure('  p50', r.p50, 'ms');
  ctx.report.figure('  p99', r.p99, 'ms');
  if (r.non2xx || r.errors || base.non2xx || base.errors) {
    ctx.report.note(
      `non-2xx or errors: server ${JSON.stringify(r.statusCodes)} / ${r.errors}, ` +
        `baseline ${JSON.stringify(base.statusCodes)} / ${base.errors}`,
    );
  }
}
