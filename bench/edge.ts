// `npm run bench -- edge`: the edge (server/modules/hosting/edge.ts) serving a built site, beside a bare `node:http`
// file server serving the same files (docs/hosting.md, "The edge"). Each runs in a child process of its own
// (this file, started with EDGE_BENCH_SERVE), the load from this one: a small page, a 1 MB file, and the page
// revalidated (`If-None-Match` → 304). The edge's routes come from a fixed in-memory table rather than the
// database: what is measured is the edge's own work (Host → deployment, manifest, send), which a route cache
// keeps off the database on a hot path anyway.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AppDeps } from '../server/kit/deps.js';
import { DirectoryArtifactStore } from '../server/modules/hosting/artifact-store.js';
import { Edge } from '../server/modules/hosting/edge.js';
import { newEdgeTrafficCounters } from '../server/modules/hosting/edge-traffic.js';
import { measureLoad, type LoadResult } from './lib/load.js';
import type { BenchContext } from './lib/plugin.js';

const HOST = 'bench.sites.bench';
const DEPLOYMENT = 'dep_bench0000000000000000';
const GOAL_RATIO = 0.7;
const GOAL_P99_MS = 20;

/** The built site: a small page and a 1 MB file (incompressible, as an image would be). */
function writeSite(dir: string): void {
  mkdirSync(join(dir, 'assets'), { recursive: true });
  writeFileSync(join(dir, 'index.html'), `<!doctype html><title>bench</title><p>${'hello '.repeat(100)}</p>`);
  writeFileSync(join(dir, 'assets', 'photo.bin'), randomBytes(1024 * 1024));
}

// ---------- the servers (child processes) ----------

async function serveEdge(siteDir: string, storeDir: string): Promise<number> {
  const store = new DirectoryArtifactStore(storeDir, 100 * 1024 * 1024);
  await store.put(DEPLOYMENT, siteDir);
  const silent = () => undefined;
  const route = { siteId: 'site_bench', deploymentId: DEPLOYMENT };
  const deps = {
    config: { sitesDomain: 'sites.bench' },
    log: { info: silent, warn: silent, error: silent, debug: silent },
    modules: {
      hosting: {
        repository: {
          liveRoute: async (_by: string, value: string) => (value === 'bench' ? route : null),
          previewRoute: async () => null,
          addEdgeTraffic: async () => undefined,
        },
        edgeRoutes: new Map(),
        traffic: newEdgeTrafficCounters(),
      },
    },
  } as unknown as AppDeps;
  const edge = new Edge(deps, store);
  return (await edge.listen(0, '127.0.0.1')).port;
}

/** The baseline: files of the directory as they are, with a length and an ETag from size and time, and 304s. */
function serveBaseline(siteDir: string): Promise<number> {
  const server = http.createServer((req, res) => {
    const path = join(siteDir, req.url === '/' ? 'index.html' : decodeURIComponent(req.url ?? '/'));
    let st;
    try {
      st = statSync(path);
    } catch {
      res.statusCode = 404;
      res.end();
      return;
    }
    const etag = `"${st.size.toString(16)}-${st.mtimeMs.toString(16)}"`;
    res.setHeader('ETag', etag);
    if (req.headers['if-none-match'] === etag) {
      res.statusCode = 304;
      res.end();
      return;
    }
    res.setHeader('Content-Length', st.size);
    res.setHeader(
      'Content-Type',
      path.endsWith('.html') ? 'text/html; charset=utf-8' : 'application/octet-stream',
    );
    createReadStream(path).pipe(res);
  });
  server.keepAliveTimeout = 65_000;
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)),
  );
}

if (process.env.EDGE_BENCH_SERVE) {
  const [kind, siteDir, storeDir] = process.env.EDGE_BENCH_SERVE.split('|') as [string, string, string];
  const port = kind === 'edge' ? await serveEdge(siteDir, storeDir) : await serveBaseline(siteDir);
  process.stdout.write(`port ${port}\n`);
}

function startChild(
  kind: 'edge' | 'baseline',
  siteDir: string,
  storeDir: string,
): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, EDGE_BENCH_SERVE: `${kind}|${siteDir}|${storeDir}`, NODE_ENV: 'production' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /port (\d+)/.exec(out);
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.once('exit', (code) => reject(new Error(`the ${kind} server exited (${code})`)));
  });
}

/** One GET with `Host` (which fetch() would not send as given): its status and ETag once the body is read. */
function get(port: number, path: string): Promise<{ status: number; etag: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers: { host: HOST } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, etag: String(res.headers.etag ?? '') }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function etagOf(port: number, path: string): Promise<string> {
  const { status, etag } = await get(port, path);
  if (status !== 200 || !etag) throw new Error(`GET ${path} answered ${status} without an ETag`);
  return etag;
}

// ---------- the bench ----------

export async function bench(ctx: BenchContext): Promise<void> {
  const { report, settings } = ctx;
  report.section('Hosting edge (static files, vs a bare node:http file server)');
  const root = mkdtempSync(join(tmpdir(), 'bench-edge-'));
  const children: ChildProcess[] = [];
  try {
    const siteDir = join(root, 'site');
    writeSite(siteDir);
    const started = performance.now();
    const edge = await startChild('edge', siteDir, join(root, 'store'));
    children.push(edge.child);
    // From the artifact stored (the child stores it before listening) to the first byte served.
    const first = await get(edge.port, '/');
    if (first.status !== 200) throw new Error(`the edge answered ${first.status}`);
    const firstByteMs = performance.now() - started;
    const base = await startChild('baseline', siteDir, '');
    children.push(base.child);

    const load = (port: number, path: string, headers: Record<string, string> = {}): Promise<LoadResult> =>
      measureLoad({
        url: `http://127.0.0.1:${port}${path}`,
        headers: { host: HOST, ...headers },
        connections: settings.connections,
        durationSec: settings.durationSec,
        warmupSec: settings.warmupSec,
      });
    const cases: { label: string; path: string; revalidate?: boolean }[] = [
      { label: 'small page', path: '/' },
      { label: '1 MB file', path: '/assets/photo.bin' },
      { label: 'small page, revalidated (304)', path: '/', revalidate: true },
    ];
    for (const c of cases) {
      const edgeHeaders: Record<string, string> = c.revalidate
        ? { 'if-none-match': await etagOf(edge.port, c.path) }
        : {};
      const baseHeaders: Record<string, string> = c.revalidate
        ? { 'if-none-match': await etagOf(base.port, c.path) }
        : {};
      const e = await load(edge.port, c.path, edgeHeaders);
      const b = await load(base.port, c.path, baseHeaders);
      // A 304 is not a 2xx: count the answers of the expected status.
      const rps = (r: LoadResult) => (c.revalidate ? (r.statusCodes['304'] ?? 0) / r.durationSec : r.rps);
      const ratio = rps(b) > 0 ? rps(e) / rps(b) : 0;
      report.figure(`${c.label}: edge`, rps(e), 'req/s', {
        target: `≥ ${GOAL_RATIO} × baseline (${Math.round(rps(b))} req/s)`,
        met: ratio >= GOAL_RATIO,
      });
      report.figure(`${c.label}: edge / baseline`, ratio, '×');
      report.figure(`${c.label}: edge p50`, e.p50, 'ms');
      report.figure(`${c.label}: edge p99`, e.p99, 'ms', {
        target: `< ${GOAL_P99_MS} ms at ${settings.connections} connections`,
        met: e.p99 < GOAL_P99_MS,
      });
      report.figure(`${c.label}: baseline p50`, b.p50, 'ms');
      report.figure(`${c.label}: baseline p99`, b.p99, 'ms');
      if (e.errors + b.errors > 0 || (!c.revalidate && e.non2xx + b.non2xx > 0)) {
        report.note(`${c.label}: errors ${e.errors}/${b.errors}, non-2xx ${e.non2xx}/${b.non2xx}`);
      }
    }
    report.figure('artifact stored → first byte served (edge process start included)', firstByteMs, 'ms');
    report.note(
      'deploy → first byte of a real build (BUILDER=local) is not measured here: see the real-builds test ' +
        '(tests/modules/hosting/hosting.local-builds.test.ts) for a full deploy',
    );
  } finally {
    for (const c of children) c.kill('SIGTERM');
    rmSync(root, { recursive: true, force: true });
  }
}
