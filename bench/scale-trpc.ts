// The SDK's path against REST (`npm run bench -- scale-trpc`): `GET /trpc/auth.me` (the typed client's transport,
// server/trpc/http.ts) and `GET /v1/auth/me` (server/rest.ts) answer the same procedure. Each path is loaded on a
// server of its own, started fresh on the bench database, so that the RSS after the run is that path's alone. Both
// servers run with the inspector on a loopback port: between loads the bench forces a full collection
// (HeapProfiler.collectGarbage) and reads the live heap (Runtime.getHeapUsage), at the start, the middle and the end
// of the load. Targets (issue "Scale"): `/trpc` at least 0.9 × `/v1` throughput, RSS under 200 MB after the run on
// either path, the live heap after full collections flat (the end within 10 MB of the start).
import type { BenchContext } from './lib/plugin.js';
import type { LoadResult } from './lib/load.js';
import { freePort, type ServerHandle } from './lib/processes.js';
import { fmt } from './lib/report.js';

const TARGET_RATIO = 0.9;
const TARGET_RSS_MB = 200;
const FLAT_HEAP_MB = 10;

interface CdpReply {
  id?: number;
  result?: { usedSize?: number };
  error?: { message: string };
}

/** A minimal Chrome DevTools Protocol session on a server's inspector (Node's built-in WebSocket). */
async function inspect(port: number) {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
    webSocketDebuggerUrl: string;
  }[];
  const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve(), { once: true });
    ws.addEventListener('error', () => reject(new Error('inspector connection failed')), { once: true });
  });
  let seq = 0;
  const pending = new Map<number, (reply: CdpReply) => void>();
  ws.addEventListener('message', (ev: MessageEvent) => {
    const reply = JSON.parse(String(ev.data)) as CdpReply;
    if (reply.id !== undefined) pending.get(reply.id)?.(reply);
  });
  const call = (method: string) =>
    new Promise<CdpReply>((resolve) => {
      const id = ++seq;
      pending.set(id, resolve);
      ws.send(JSON.stringify({ id, method }));
    });
  return {
    /** Live heap after forced full collections, in MB. */
    async heapAfterGcMb(): Promise<number> {
      for (let i = 0; i < 3; i++) {
        await call('HeapProfiler.collectGarbage');
        // Finalizers queued by a collection run on the next turns of the server's loop.
        await new Promise((r) => setTimeout(r, 200));
      }
      const reply = await call('Runtime.getHeapUsage');
      if (reply.error || reply.result?.usedSize === undefined) {
        throw new Error(`Runtime.getHeapUsage failed: ${reply.error?.message ?? 'no result'}`);
      }
      return reply.result.usedSize / 1024 / 1024;
    },
    close: () => ws.close(),
  };
}

interface PathRun {
  rps: number;
  p99: number;
  rssMb: number | null;
  heapMb: [start: number, middle: number, end: number];
  failures: string | undefined;
}

/** Each path is loaded for 4 × BENCH_DURATION (60 s by default), the length the RSS goal is stated for. */
const loadSeconds = (ctx: BenchContext) => ctx.settings.durationSec * 4;

/** One path on a fresh server: heap, half the load, heap, the other half, heap, RSS. */
async function measurePath(ctx: BenchContext, path: string): Promise<PathRun> {
  const port = await freePort();
  let server: ServerHandle | undefined;
  let session: Awaited<ReturnType<typeof inspect>> | undefined;
  try {
    server = await ctx.startServer({ NODE_OPTIONS: `--inspect=127.0.0.1:${port}` });
    session = await inspect(port);
    const half = Math.max(1, Math.round(loadSeconds(ctx) / 2));
    const load = (warmupSec: number): Promise<LoadResult> => ctx.load({ path, durationSec: half, warmupSec });
    // A short unmeasured load first, so that the start figure is a warmed-up process's.
    await ctx.load({ path, durationSec: 1, warmupSec: 0 });
    const start = await session.heapAfterGcMb();
    const first = await load(ctx.settings.warmupSec);
    const middle = await session.heapAfterGcMb();
    const second = await load(0);
    const rssMb = server.rssMb();
    const end = await session.heapAfterGcMb();
    const ok = first.responses2xx + second.responses2xx;
    const failed = first.non2xx + second.non2xx + first.errors + second.errors;
    return {
      rps: ok / (first.durationSec + second.durationSec),
      p99: Math.max(first.p99, second.p99),
      rssMb,
      heapMb: [start, middle, end],
      failures: failed > 0 ? `${failed} non-2xx responses or errors` : undefined,
    };
  } finally {
    session?.close();
    await server?.stop();
  }
}

export async function bench(ctx: BenchContext): Promise<void> {
  ctx.report.section('The SDK path: /trpc against /v1 (auth.me)');
  const seconds = 2 * Math.max(1, Math.round(loadSeconds(ctx) / 2));
  console.log(
    `   each path: a fresh server, ${ctx.settings.connections} connections, ${ctx.settings.warmupSec} s warm-up, ` +
      `${seconds} s measured (4 × BENCH_DURATION, as the mixed load)`,
  );
  const rest = await measurePath(ctx, '/v1/auth/me');
  const trpc = await measurePath(ctx, '/trpc/auth.me');
  const ratio = trpc.rps / rest.rps;

  ctx.report.figure('GET /v1/auth/me', rest.rps, 'req/s');
  ctx.report.figure('GET /trpc/auth.me', trpc.rps, 'req/s', {
    target: `≥ ${fmt(TARGET_RATIO * rest.rps)} req/s (${TARGET_RATIO} × /v1)`,
    met: ratio >= TARGET_RATIO,
  });
  ctx.report.figure('  share of /v1', 100 * ratio, '%', {
    target: `≥ ${100 * TARGET_RATIO} %`,
    met: ratio >= TARGET_RATIO,
  });
  ctx.report.figure('  p99 /v1', rest.p99, 'ms');
  ctx.report.figure('  p99 /trpc', trpc.p99, 'ms');
  for (const [name, run] of [
    ['/v1', rest],
    ['/trpc', trpc],
  ] as const) {
    ctx.report.figure(`RSS after ${seconds} s on ${name}`, run.rssMb, 'MB', {
      target: `< ${TARGET_RSS_MB} MB`,
      met: run.rssMb !== null && run.rssMb < TARGET_RSS_MB,
    });
  }
  for (const [name, run] of [
    ['/trpc', trpc],
    ['/v1', rest],
  ] as const) {
    const [start, middle, end] = run.heapMb;
    ctx.report.figure(`live heap after full GC on ${name}: start`, start, 'MB');
    ctx.report.figure('  middle', middle, 'MB');
    ctx.report.figure('  end', end, 'MB', {
      target: `flat (≤ start + ${FLAT_HEAP_MB} MB)`,
      met: end <= start + FLAT_HEAP_MB,
    });
    if (run.failures) ctx.report.note(`${name}: ${run.failures}`);
  }
}
