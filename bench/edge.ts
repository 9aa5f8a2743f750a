// `npm run bench -- edge`: the edge (server/modules/hosting/edge.ts) serving a built site, beside a bare `node:http`
// file server serving the same files (docs/hosting.md, "The edge"). Each runs in a child process of its own
// (this file, started with EDGE_BENCH_SERVE), the load from this one: a small page, a 1 MB file, and the page
// revalidated (`If-None-Match` → 304). The edge's routes come from a fixed in-memory table rather than the
// database: what is measured is the edge's own work (Host → deployment, manifest, send), which a route cache
// keeps off the database on a hot path anyway.
//
// Then a real deploy, as a user makes one (docs/hosting.md, "A real site from a local repository, in a few commands"):
// a server of its own with BUILDER=local and an edge port, a repository made here and served over Git's smart HTTP on
// loopback, a site created through the REST API, and the time from the deploy request to the first `GET /` on the edge
// that answers 200 with the new build's page.
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
import { bubblewrapAvailable } from '../server/modules/hosting/build-process.js';
import { commitFiles, newRepo, startGitServer, type GitServer } from '../tests/support/git-server.js';
import { dropPostgresDatabase, recreatePostgresDatabase } from './lib/database.js';
import { measureLoad, type LoadResult } from './lib/load.js';
import type { BenchContext } from './lib/plugin.js';
import {
  developmentServerEnv,
  freePort,
  restCaller,
  SERVER_SCRIPT,
  startServerProcess,
  type ServerHandle,
} from './lib/processes.js';
import { median } from './lib/stats.js';

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

/** One GET with `Host` (which fetch() would not send as given, `HOST` unless told): its status, ETag and body. */
function get(
  port: number,
  path: string,
  host = HOST,
): Promise<{ status: number; etag: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          etag: String(res.headers.etag ?? ''),
          body: Buffer.concat(chunks).toString(),
        }),
      );
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
  } finally {
    for (const c of children) c.kill('SIGTERM');
    rmSync(root, { recursive: true, force: true });
  }
  await deployToFirstByte(ctx);
}

// ---------- deploy → first byte of a real build ----------

const REAL_OWNER = { email: 'edge-real-bench@example.com', password: 'edge-real-bench-password' };
const REAL_ROUNDS = 3;
const POLL_MS = 20;
const DEPLOY_TIMEOUT_MS = 180_000;

/**
 * A small site that builds without the network (the sandbox has none, docs/hosting.md): `npm run build` runs a node
 * script writing `build/index.html`, the react defaults' output directory (docs/sites.md).
 */
function smallSite(title: string): Record<string, string> {
  return {
    'package.json': JSON.stringify({ name: 'site', version: '1.0.0', scripts: { build: 'node build.js' } }),
    'build.js': `
const fs = require('fs');
fs.mkdirSync('build', { recursive: true });
console.log('building ${title}');
fs.writeFileSync('build/index.html', '<!doctype html><title>${title}</title><p>${title}</p>');
`,
  };
}

/**
 * The time from a deploy to the first byte a user gets of the new build. A server of its own (NODE_ENV=development,
 * BUILDER=local, the default bubblewrap sandbox, an edge port, SITES_DOMAIN=sites.bench, DATA_DIR in a temporary
 * directory) on a PostgreSQL database of its own (`<bench database>_edge_real`, dropped afterwards), so that no
 * other server takes its build jobs; WEBHOOK_ALLOW_PRIVATE_TARGETS=true lets the build fetch from the loopback
 * `http://` Git server (docs/hosting.md, "Fetching"). A real build starts as soon as it is queued
 * (PROVISIONING_DELAY_MS paces only the simulated builder); the figures below show the wait apart all the same.
 * Three rounds, each a new commit with its own title and a new deployment; the edge is polled every 20 ms from the
 * deploy request on, until `GET /` answers 200 with that title.
 */
async function deployToFirstByte(ctx: BenchContext): Promise<void> {
  const { report } = ctx;
  report.section('Hosting edge: deploy → first byte of a real build');
  if (!bubblewrapAvailable()) {
    report.note('bubblewrap (bwrap) is not installed: deploy → first byte of a real build is not measured');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'bench-edge-real-'));
  const dbUrl = new URL(ctx.databaseUrl);
  dbUrl.pathname = `/${decodeURIComponent(dbUrl.pathname.slice(1))}_edge_real`;
  let gitServer: GitServer | undefined;
  let server: ServerHandle | undefined;
  try {
    await recreatePostgresDatabase(dbUrl.href);
    const repos = join(dir, 'repos');
    mkdirSync(repos);
    const repo = newRepo(repos, 'site');
    commitFiles(repo, smallSite('bench round 0'), 'round 0');
    gitServer = await startGitServer(repos);

    const port = await freePort();
    const edgePort = await freePort();
    server = await startServerProcess({
      name: 'edge: real builds',
      script: SERVER_SCRIPT,
      port,
      healthPath: '/readyz',
      env: developmentServerEnv(port, {
        DATA_DIR: join(dir, 'data'),
        DATABASE_URL: dbUrl.href,
        JWT_SECRET: ctx.jwtSecret,
        BCRYPT_COST: '4',
        OWNER_EMAIL: REAL_OWNER.email,
        OWNER_PASSWORD: REAL_OWNER.password,
        BUILDER: 'local',
        EDGE_PORT: String(edgePort),
        SITES_DOMAIN: 'sites.bench',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      }),
    });
    const call = restCaller(server.baseUrl);
    const login = await call<{ token?: string }>('POST', '/v1/auth/login', REAL_OWNER);
    const token = login.body.token;
    if (!token) throw new Error(`login answered ${login.status}`);
    const created = await call<{ site: { id: string; url: string } }>(
      'POST',
      '/v1/hosting/sites',
      { name: 'edge bench', git_repo: gitServer.url('site'), framework: 'react' },
      token,
    );
    if (created.status !== 201) {
      throw new Error(`creating the site answered ${created.status}: ${JSON.stringify(created.body)}`);
    }
    const site = created.body.site;
    const host = new URL(site.url).host;

    type Deployment = {
      id: string;
      status: string;
      status_message: string | null;
      created_at: string;
      started_at: string | null;
      completed_at: string | null;
    };
    const deployment = async (id: string) => {
      const res = await call<{ deployment: Deployment }>(
        'GET',
        `/v1/hosting/sites/${site.id}/deployments/${id}`,
        undefined,
        token,
      );
      return res.body.deployment;
    };
    const total: number[] = [];
    const waited: number[] = [];
    const built: number[] = [];
    const served: number[] = [];
    for (let round = 1; round <= REAL_ROUNDS; round++) {
      const title = `bench round ${round}`;
      commitFiles(repo, smallSite(title), `round ${round}`);
      const started = performance.now();
      const posted = await call<{ deployment: Deployment }>(
        'POST',
        `/v1/hosting/sites/${site.id}/deploy`,
        {},
        token,
      );
      if (posted.status !== 202) {
        throw new Error(`the deploy answered ${posted.status}: ${JSON.stringify(posted.body)}`);
      }
      const id = posted.body.deployment.id;
      for (let polls = 1; ; polls++) {
        const page = await get(edgePort, '/', host).catch(() => ({ status: 0, body: '' }));
        if (page.status === 200 && page.body.includes(`<title>${title}</title>`)) break;
        const elapsed = performance.now() - started;
        // Now and then (every second or so), whether the build failed, which the edge alone would never say.
        if (polls % 50 === 0 || elapsed > DEPLOY_TIMEOUT_MS) {
          const d = await deployment(id);
          if (d.status === 'failed' || d.status === 'canceled') {
            throw new Error(`round ${round}: the deployment ended ${d.status}: ${d.status_message ?? ''}`);
          }
          if (elapsed > DEPLOY_TIMEOUT_MS) {
            throw new Error(`round ${round}: nothing served after ${DEPLOY_TIMEOUT_MS} ms (${d.status})`);
          }
        }
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
      const firstByteMs = performance.now() - started;
      const firstByteWall = Date.now();
      total.push(firstByteMs);
      // The deployment's own timestamps (docs/sites.md): queued → building → success, on this machine's clock.
      const d = await deployment(id);
      if (d.started_at && d.completed_at) {
        waited.push(Date.parse(d.started_at) - Date.parse(d.created_at));
        built.push(Date.parse(d.completed_at) - Date.parse(d.started_at));
        served.push(firstByteWall - Date.parse(d.completed_at));
      }
    }
    report.figure('deploy → first byte of a real small build (BUILDER=local, bwrap)', median(total), 'ms');
    report.note(
      `median of ${REAL_ROUNDS} rounds; fastest ${Math.round(Math.min(...total))} ms, ` +
        `slowest ${Math.round(Math.max(...total))} ms`,
    );
    if (built.length === REAL_ROUNDS) {
      report.figure('  queued → building (created_at → started_at)', median(waited), 'ms');
      report.figure(
        '  the build (started_at → completed_at: fetch, npm install, build, store)',
        median(built),
        'ms',
      );
      report.figure(
        '  success recorded → first byte served (completed_at → first 200)',
        median(served),
        'ms',
      );
    }
    const warnings = server.warnings();
    if (warnings.length > 0) {
      report.note(
        `${server.name} logged ${warnings.length} warning/error lines; the first: ${warnings[0]!.slice(0, 300)}`,
      );
    }
  } finally {
    await server?.stop();
    await gitServer?.close();
    rmSync(dir, { recursive: true, force: true });
    await dropPostgresDatabase(dbUrl.href).catch(() => {});
  }
}
