// `npm run bench`: figures of the real server (built as `npm start` does, in a child process, NODE_ENV=production) on
// PostgreSQL and on the embedded PGlite, each printed beside its target. Nothing is asserted: the run exits 0
// whatever the figures, and non-zero only when it could not measure.
//
//   npm run bench                  everything (about two minutes plus what the module benches take)
//   npm run bench -- core vpn      only the named parts: core (PostgreSQL figures and baseline), pglite, and any
//                                  module bench in bench/*.ts (see bench/lib/plugin.ts)
//
// Settings: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/bench; dropped and created again),
// BENCH_DURATION (measured seconds per load, 15), BENCH_WARMUP (3), BENCH_CONNECTIONS (50), BCRYPT_COST (12),
// BENCH_SERVER_NODE_ARGS (extra Node flags for the server under test, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`),
// BENCH_REDIS_URL (the servers under test keep their limits in this Redis, as with REDIS_URL, under a key prefix of
// the run's own; unset: in process, the default; bench/scale-limits.ts uses it, else redis://127.0.0.1:6379).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import bcrypt from 'bcryptjs';
import { recreatePostgresDatabase, upgradeAllToEnterprise } from './lib/database.js';
import { describeFailures, measureLoad, type LoadResult } from './lib/load.js';
import type { ApiResponse, BenchContext, BenchPlugin, BenchSettings } from './lib/plugin.js';
import {
  ROOT,
  SERVER_SCRIPT,
  buildServer,
  freePort,
  startServerProcess,
  type ServerHandle,
} from './lib/processes.js';
import { deleteRedisKeys } from './lib/redis.js';
import { Report, fmt } from './lib/report.js';

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number, got "${raw}"`);
  return n;
}

const settings: BenchSettings = {
  durationSec: envInt('BENCH_DURATION', 15),
  warmupSec: envInt('BENCH_WARMUP', 3),
  connections: envInt('BENCH_CONNECTIONS', 50),
  cores: availableParallelism(),
};
const BCRYPT_COST = envInt('BCRYPT_COST', 12);
const DATABASE_URL = process.env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/bench';
const REDIS_URL = process.env.BENCH_REDIS_URL || undefined;
const REDIS_KEY_PREFIX = `bench:${randomBytes(4).toString('hex')}:`;
const JWT_SECRET = randomBytes(48).toString('base64url');
const OWNER = { email: 'bench-owner@example.test', password: randomBytes(12).toString('base64url') };
/** The server trusts its proxy (TRUST_PROXY=true): /v1/auth/* in production needs HTTPS, as behind a real one. */
const VIA_HTTPS_PROXY = { 'x-forwarded-proto': 'https' };

const TARGET_RATIO = 0.6;
const TARGET_P99_MS = 25;
const TARGET_RSS_MB = 200;

const BENCH_DIR = join(ROOT, 'bench');
const RESERVED = ['core', 'pglite'];

type Db = { kind: 'postgresql'; url: string; dataDir: string } | { kind: 'pglite'; dataDir: string };

const running = new Set<ServerHandle>();
const tempDirs: string[] = [];
const report = new Report();

function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `bench-${label}-`));
  tempDirs.push(dir);
  return dir;
}

function serverEnv(db: Db, port: number, extra: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'production',
    // Production needs an SMTP server; the bench sends no mail, so none listens there.
    MAIL_URL: 'smtp://127.0.0.1:2525',
    MAIL_FROM: 'no-reply@example.com',
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'warn',
    JWT_SECRET,
    TRUST_PROXY: 'true',
    // The burst limit is per token; the bench sends far more than a client would.
    RATE_LIMIT_BURST: '1000000',
    AUTH_RATE_LIMIT: '1000000',
    BCRYPT_COST: String(BCRYPT_COST),
    DATA_DIR: db.dataDir,
    OWNER_EMAIL: OWNER.email,
    OWNER_PASSWORD: OWNER.password,
    OWNER_NAME: 'Bench Owner',
    ORGANIZATION_NAME: 'Bench Organization',
    ...(db.kind === 'postgresql' ? { DATABASE_URL: db.url } : {}),
    ...(REDIS_URL ? { REDIS_URL, REDIS_KEY_PREFIX } : {}),
    ...extra,
  };
}

async function startServer(name: string, db: Db, extra: Record<string, string> = {}): Promise<ServerHandle> {
  const port = await freePort();
  const server = await startServerProcess({
    name,
    script: SERVER_SCRIPT,
    port,
    env: serverEnv(db, port, extra),
    healthPath: '/readyz',
  });
  running.add(server);
  return server;
}

async function stop(server: ServerHandle): Promise<void> {
  running.delete(server);
  await server.stop();
}

/**
 * First start: migrations and the OWNER_* bootstrap (an organization with its owner). Then, with no server
 * running, the organization goes to the enterprise plan (unlimited monthly quota), and the server is started
 * again for the measurement.
 */
async function startSeeded(name: string, db: Db): Promise<ServerHandle> {
  const first = await startServer(`${name} (first start)`, db);
  await stop(first);
  const upgraded = await upgradeAllToEnterprise(
    db.kind === 'postgresql' ? db : { kind: 'pglite', dir: join(db.dataDir, 'pglite') },
  );
  if (upgraded !== 1) throw new Error(`expected the bootstrap organization only, found ${upgraded}`);
  return startServer(name, db);
}

async function api<T>(
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
  token?: string,
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...VIA_HTTPS_PROXY };
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Left as text.
  }
  return { status: res.status, headers: res.headers, body: parsed as T };
}

/** Logs the owner in and checks that GET /v1/auth/me answers 200 with the token. */
async function ownerToken(server: ServerHandle): Promise<string> {
  const res = await api<{ token?: string }>(server.baseUrl, 'POST', '/v1/auth/login', OWNER);
  if (res.status !== 200 || !res.body.token) {
    throw new Error(`login on ${server.name} answered ${res.status}: ${JSON.stringify(res.body)}`);
  }
  const me = await api(server.baseUrl, 'GET', '/v1/auth/me', undefined, res.body.token);
  if (me.status !== 200)
    throw new Error(`/auth/me on ${server.name} answered ${me.status}: ${JSON.stringify(me.body)}`);
  return res.body.token;
}

function meLoad(baseUrl: string, token: string): Promise<LoadResult> {
  return measureLoad({
    url: `${baseUrl}/v1/auth/me`,
    headers: { ...VIA_HTTPS_PROXY, authorization: `Bearer ${token}` },
    connections: settings.connections,
    durationSec: settings.durationSec,
    warmupSec: settings.warmupSec,
  });
}

function noteFailures(r: LoadResult): void {
  const failures = describeFailures(r);
  if (failures) report.note(`only 2xx responses count: ${failures}`);
}

function noteServerWarnings(server: ServerHandle): void {
  const warnings = server.warnings();
  if (warnings.length === 0) return;
  report.note(`${server.name} logged ${warnings.length} warning/error lines; the first ones:`);
  for (const w of warnings.slice(0, 3)) console.log(`     ${w.slice(0, 300)}`);
}

/** Median time of one bcrypt hash at the configured cost, with the library the server uses (bcryptjs). */
async function bcryptHashMs(samples = 5): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t = performance.now();
    await bcrypt.hash('correct-horse-battery-staple', BCRYPT_COST);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

function moduleBenches(): string[] {
  return readdirSync(BENCH_DIR)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && f !== 'run.ts')
    .map((f) => f.slice(0, -'.ts'.length))
    .filter((name) => !RESERVED.includes(name))
    .sort();
}

async function loadModuleBench(name: string): Promise<BenchPlugin> {
  const mod = (await import(pathToFileURL(join(BENCH_DIR, `${name}.ts`)).href)) as { bench?: unknown };
  if (typeof mod.bench !== 'function')
    throw new Error(`bench/${name}.ts does not export a function named bench`);
  return mod.bench as BenchPlugin;
}

async function runPostgres(want: (part: string) => boolean, modules: string[], hashMs: number | null) {
  report.section(`PostgreSQL (${DATABASE_URL.replace(/\/\/[^@]*@/, '//')})`);
  await recreatePostgresDatabase(DATABASE_URL);
  const db: Db = { kind: 'postgresql', url: DATABASE_URL, dataDir: tempDir('pg') };
  const server = await startSeeded('server on PostgreSQL', db);
  report.figure('start to /readyz (migrated database)', server.startMs, 'ms');
  const token = await ownerToken(server);

  if (want('core')) {
    // The baseline runs first, while the server under test sits idle, so that its target is known below.
    const port = await freePort();
    const baseline = await startServerProcess({
      name: 'baseline',
      script: 'bench/lib/baseline-server.ts',
      port,
      env: { PORT: String(port), DATABASE_URL, JWT_SECRET },
    });
    running.add(baseline);
    const check = await api(baseline.baseUrl, 'GET', '/v1/auth/me', undefined, token);
    if (check.status !== 200) throw new Error(`baseline /v1/auth/me answered ${check.status}`);
    const base = await meLoad(baseline.baseUrl, token);
    await stop(baseline);
    report.figure('baseline: Fastify + jsonwebtoken + pg, req/s', base.rps, 'req/s');
    report.figure('baseline p50', base.p50, 'ms');
    report.figure('baseline p99', base.p99, 'ms');
    noteFailures(base);

    const me = await meLoad(server.baseUrl, token);
    const minRps = TARGET_RATIO * base.rps;
    report.figure(`GET /v1/auth/me, ${settings.connections} connections`, me.rps, 'req/s', {
      target: `≥ ${fmt(minRps)} req/s (${TARGET_RATIO} × baseline)`,
      met: me.rps >= minRps,
    });
    report.figure('  share of the baseline', (100 * me.rps) / base.rps, '%', {
      target: `≥ ${TARGET_RATIO * 100} %`,
      met: me.rps >= minRps,
    });
    report.figure('  p50', me.p50, 'ms');
    report.figure('  p99', me.p99, 'ms', { target: `< ${TARGET_P99_MS} ms`, met: me.p99 < TARGET_P99_MS });
    noteFailures(me);

    const logins = await measureLoad({
      url: `${server.baseUrl}/v1/auth/login`,
      method: 'POST',
      headers: VIA_HTTPS_PROXY,
      body: OWNER,
      connections: 2 * settings.cores,
      durationSec: settings.durationSec,
    });
    const bound = hashMs ? (settings.cores * 1000) / hashMs : null;
    report.figure(`POST /v1/auth/login, ${2 * settings.cores} connections`, logins.rps, 'logins/s', {
      target: bound
        ? `bound ${fmt(bound)}/s (${settings.cores} cores ÷ ${fmt(hashMs)} ms per hash)`
        : 'bound: hash time not measured',
    });
    if (bound) report.figure('  share of the bcrypt bound', (100 * logins.rps) / bound, '%');
    report.figure('  p50', logins.p50, 'ms');
    report.figure('  p99', logins.p99, 'ms');
    noteFailures(logins);

    const rss = server.rssMb();
    report.figure('server RSS after the run', rss, 'MB', {
      target: `< ${TARGET_RSS_MB} MB`,
      met: rss !== null && rss < TARGET_RSS_MB,
    });
    report.figure('  peak RSS', server.peakRssMb(), 'MB');
  }

  let failed = false;
  for (const name of modules.filter(want)) {
    const ctx: BenchContext = {
      server,
      databaseUrl: DATABASE_URL,
      token,
      jwtSecret: JWT_SECRET,
      headers: { ...VIA_HTTPS_PROXY, authorization: `Bearer ${token}` },
      settings,
      report,
      api: (method, path, body, t) => api(server.baseUrl, method, path, body, t ?? token),
      load: (o) =>
        measureLoad({
          url: `${server.baseUrl}${o.path}`,
          method: o.method ?? 'GET',
          headers: { ...VIA_HTTPS_PROXY, authorization: `Bearer ${token}`, ...o.headers },
          body: o.body,
          connections: o.connections ?? settings.connections,
          durationSec: o.durationSec ?? settings.durationSec,
          warmupSec: o.warmupSec ?? settings.warmupSec,
          uniqueHeader: o.uniqueHeader,
        }),
      startServer: (env) => startServer(`extra server for ${name}`, db, env),
    };
    const started = performance.now();
    try {
      const bench = await loadModuleBench(name);
      await bench(ctx);
      console.log(`   (bench/${name}.ts took ${fmt((performance.now() - started) / 1000)} s)`);
    } catch (err) {
      failed = true;
      report.note(
        `bench/${name}.ts failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
      );
    }
  }
  if (modules.some(want)) {
    report.section('PostgreSQL, after the module benches');
    const rss = server.rssMb();
    report.figure('server RSS', rss, 'MB', {
      target: `< ${TARGET_RSS_MB} MB`,
      met: rss !== null && rss < TARGET_RSS_MB,
    });
  }
  noteServerWarnings(server);
  await stop(server);
  return failed;
}

async function runPglite() {
  report.section('PGlite (embedded, the default without DATABASE_URL)');
  const db: Db = { kind: 'pglite', dataDir: tempDir('pglite') };
  const server = await startSeeded('server on PGlite', db);
  report.figure('start to /readyz (migrated database)', server.startMs, 'ms');
  const token = await ownerToken(server);
  const me = await meLoad(server.baseUrl, token);
  report.figure(`GET /v1/auth/me, ${settings.connections} connections`, me.rps, 'req/s');
  report.figure('  p50', me.p50, 'ms');
  report.figure('  p99', me.p99, 'ms');
  noteFailures(me);
  report.figure('server RSS after the run', server.rssMb(), 'MB');
  noteServerWarnings(server);
  await stop(server);
}

async function main(): Promise<number> {
  const began = performance.now();
  const modules = moduleBenches();
  const parts = ['core', 'pglite', ...modules];
  const only = process.argv.slice(2);
  const unknown = only.filter((p) => !parts.includes(p));
  if (unknown.length) throw new Error(`unknown part ${unknown.join(', ')}; known: ${parts.join(', ')}`);
  const want = (part: string) => only.length === 0 || only.includes(part);

  const load1 = loadavg()[0]!;
  console.log(
    `bench: Node ${process.version}, ${settings.cores} cores, load average ${fmt(load1, 2)}; ` +
      `${settings.durationSec} s measured after ${settings.warmupSec} s warm-up per load; ` +
      `parts: ${parts.filter(want).join(', ')}` +
      (REDIS_URL ? `; limits in Redis (${REDIS_URL.replace(/\/\/[^@]*@/, '//')})` : ''),
  );
  if (load1 > settings.cores / 2) {
    console.log(
      `bench: the load average (${fmt(load1, 2)}) says other work ran on these ${settings.cores} cores in the last ` +
        'minute: if it still runs, the figures below are lower than on a quiet machine',
    );
  }

  // The server runs as `npm start` runs it: built into dist/ first.
  buildServer();

  let hashMs: number | null = null;
  if (want('core')) {
    report.section('bcrypt');
    hashMs = await bcryptHashMs();
    report.figure(`hash time at cost ${BCRYPT_COST} (bcryptjs, median of 5)`, hashMs, 'ms');
  }
  let failed = false;
  if (want('core') || modules.some(want)) failed = await runPostgres(want, modules, hashMs);
  if (want('pglite')) await runPglite();

  report.printSummary();
  const file = report.save(join(BENCH_DIR, 'results'), {
    node: process.version,
    cores: settings.cores,
    loadAverageAtStart: load1,
    loadAverageAtEnd: loadavg()[0],
    settings,
    bcryptCost: BCRYPT_COST,
  });
  console.log(
    `\nbench: done in ${fmt((performance.now() - began) / 1000)} s; load average now ${fmt(loadavg()[0]!, 2)}; ` +
      `figures saved to ${file.slice(ROOT.length + 1)}`,
  );
  return failed ? 1 : 0;
}

async function cleanUp() {
  await Promise.allSettled([...running].map((s) => s.stop()));
  if (REDIS_URL) await deleteRedisKeys(REDIS_URL, REDIS_KEY_PREFIX).catch(() => undefined);
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
}

process.on('SIGINT', () => {
  void cleanUp().then(() => process.exit(130));
});

try {
  process.exitCode = await main();
} catch (err) {
  console.error(`\nbench: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
} finally {
  await cleanUp();
}
