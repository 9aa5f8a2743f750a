// Crash recovery of jobs for `npm run bench` (alone: `npm run bench -- scale-jobs`), measured from outside: a burst
// of VPN connection creates against a server process that is killed (SIGKILL) in the middle of it, while it holds
// `vpn.activate` jobs; then another process starts on the same database. Figures: the time from the kill until every
// job the dead process held is running again, and until every connection is `active`. Goal: every job held by a dead
// process retried within 30 s (docs/operating.md, "Jobs and crash recovery").
//
// It runs on a database of its own (`<BENCH_DATABASE_URL's name>_scale_jobs`, dropped and created again) with
// server processes of its own, so the shared bench server's queue is not involved. The jobs are held the way a slow
// provisioning step would hold them: right before the kill, the bench locks the rows of the connections created so
// far, so the dead process's activations are claimed (`active` in the queue) and waiting; the lock goes with the kill.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { recreatePostgresDatabase, upgradeAllToEnterprise } from './lib/database.js';
import type { BenchContext } from './lib/plugin.js';
import { freePort, SERVER_SCRIPT, startServerProcess, type ServerHandle } from './lib/processes.js';
import { fmt } from './lib/report.js';

const BURST = 60;
const CONCURRENCY = 6;
/** Connections answered before the kill. */
const KILL_AFTER = 30;
const GOAL_S = 30;
const DEADLINE_MS = 180_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function ownDatabaseUrl(benchUrl: string): string {
  const url = new URL(benchUrl);
  url.pathname = `/${decodeURIComponent(url.pathname.slice(1))}_scale_jobs`;
  return url.href;
}

export async function bench(ctx: BenchContext): Promise<void> {
  ctx.report.section('Crash recovery of jobs (SIGKILL mid-burst, then restart)');
  const databaseUrl = ownDatabaseUrl(ctx.databaseUrl);
  await recreatePostgresDatabase(databaseUrl);
  const owner = { email: 'crash-owner@example.test', password: randomBytes(12).toString('base64url') };
  const env = (port: number): Record<string, string> => ({
    NODE_ENV: 'production',
    // Production needs an SMTP server; the bench sends no mail, so none listens there.
    MAIL_URL: 'smtp://127.0.0.1:2525',
    MAIL_FROM: 'no-reply@example.com',
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'error',
    JWT_SECRET: ctx.jwtSecret,
    TRUST_PROXY: 'true',
    RATE_LIMIT_BURST: '1000000',
    AUTH_RATE_LIMIT: '1000000',
    BCRYPT_COST: '10',
    DATABASE_URL: databaseUrl,
    DATA_DIR: `/tmp/bench-scale-jobs-${process.pid}`,
    OWNER_EMAIL: owner.email,
    OWNER_PASSWORD: owner.password,
    ORGANIZATION_NAME: 'Crash Bench',
    PROVISIONING_DELAY_MS: '1500',
  });
  const start = async (name: string): Promise<ServerHandle> => {
    const port = await freePort();
    return startServerProcess({ name, script: SERVER_SCRIPT, port, env: env(port), healthPath: '/readyz' });
  };
  const servers: ServerHandle[] = [];
  const db = new pg.Client({ connectionString: databaseUrl });
  try {
    // Bootstrap (migrations, the owner's organization), then the enterprise plan: the burst is not held by limits.
    const boot = await start('scale-jobs (first start)');
    await boot.stop();
    await upgradeAllToEnterprise({ kind: 'postgresql', url: databaseUrl });
    const first = await start('scale-jobs A');
    servers.push(first);
    await db.connect();

    const call = async (base: string, method: string, path: string, body?: unknown, token?: string) => {
      const headers: Record<string, string> = { 'x-forwarded-proto': 'https' };
      if (token) headers.authorization = `Bearer ${token}`;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(`${base}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json().catch(() => null)) as { token?: string } | null };
    };
    const login = await call(first.baseUrl, 'POST', '/v1/auth/login', owner);
    if (login.status !== 200) throw new Error(`login answered ${login.status}`);
    const token = login.body?.token ?? '';

    // The burst, from CONCURRENCY clients; at KILL_AFTER answers the rows are locked and the process killed.
    let answered = 0;
    let sent = 0;
    let killed = false;
    let killAt = 0;
    let held: string[] = [];
    let killing: Promise<void> | undefined;
    const kill = async () => {
      const lock = new pg.Client({ connectionString: databaseUrl });
      await lock.connect();
      await lock.query('begin');
      await lock.query(`select id from vpn_connections for update`);
      // Wait for the process to claim activations (they wait on the lock), up to the provisioning delay and more.
      const deadline = Date.now() + 10_000;
      for (;;) {
        const rows = await db.query<{ id: string }>(
          `select id from pgboss.job where name = 'vpn.activate' and state = 'active'`,
        );
        if (rows.rows.length > 0 || Date.now() > deadline) {
          held = rows.rows.map((r) => r.id);
          break;
        }
        await sleep(50);
      }
      process.kill(first.pid, 'SIGKILL');
      killAt = performance.now();
      killed = true;
      await first.stop(); // resolves once it has exited
      await lock.query('rollback');
      await lock.end();
    };
    const client = async () => {
      while (!killed && sent < BURST) {
        sent++;
        try {
          const res = await call(
            first.baseUrl,
            'POST',
            '/v1/vpn/connections',
            { name: `burst-${sent}`, location: 'eu-central', protocol: 'wireguard' },
            token,
          );
          if (res.status === 201) answered++;
        } catch {
          // The process is gone: this request may or may not have committed.
        }
        if (answered >= KILL_AFTER) killing ??= kill();
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, client));
    killing ??= kill();
    await killing;
    servers.length = 0;

    const second = await start('scale-jobs B');
    servers.push(second);
    const restartedAt = performance.now();
    const heldIds = held;
    let allRetriedMs: number | null = null;
    let allActiveMs: number | null = null;
    let total = 0;
    const deadline = performance.now() + DEADLINE_MS;
    while (performance.now() < deadline && (allRetriedMs === null || allActiveMs === null)) {
      if (allRetriedMs === null) {
        const r = await db.query<{ n: number }>(
          `select count(*)::int as n from pgboss.job
            where id = any($1::uuid[]) and retry_count >= 1 and state in ('active', 'completed')`,
          [heldIds],
        );
        if (r.rows[0]!.n === heldIds.length) allRetriedMs = performance.now() - killAt;
      }
      if (allActiveMs === null) {
        const r = await db.query<{ total: number; waiting: number }>(
          `select count(*)::int as total, count(*) filter (where status <> 'active')::int as waiting
             from vpn_connections`,
        );
        total = r.rows[0]!.total;
        if (r.rows[0]!.waiting === 0) allActiveMs = performance.now() - killAt;
      }
      await sleep(100);
    }
    const events = await db.query<{ duplicated: number }>(
      `select count(*)::int as duplicated from (select data->'object'->>'id' from events
         where type = 'vpn.connected' group by 1 having count(*) > 1) d`,
    );

    ctx.report.note(
      `${total} connections created (${answered} answered before the kill), ${heldIds.length} vpn.activate jobs ` +
        `held by the killed process; the new process was ready ${fmt((restartedAt - killAt) / 1000)} s after the kill`,
    );
    const met = (ms: number | null) => ms !== null && ms <= GOAL_S * 1000;
    ctx.report.figure(
      'SIGKILL → every job the dead process held running again',
      allRetriedMs === null ? null : allRetriedMs / 1000,
      's',
      { target: `≤ ${GOAL_S} s`, met: heldIds.length > 0 && met(allRetriedMs) },
    );
    ctx.report.figure(
      'SIGKILL → every connection active',
      allActiveMs === null ? null : allActiveMs / 1000,
      's',
      { target: `≤ ${GOAL_S} s`, met: met(allActiveMs) },
    );
    ctx.report.figure('vpn.connected events emitted twice', events.rows[0]!.duplicated, 'connections', {
      target: '0',
      met: events.rows[0]!.duplicated === 0,
    });
  } finally {
    await db.end().catch(() => {});
    for (const s of servers) await s.stop();
  }
}
