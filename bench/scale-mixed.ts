// A mixed read/write load on /v1 (alone: `npm run bench -- scale-mixed`), on a server of its own (the built server as
// `npm start` runs it, same settings as the others), against one enterprise organization with 40 VPN connections
// seeded. Each connection repeats a cycle of 20 requests (docs/jobs.md, "Measuring the mixed load"):
//   GET /v1/auth/me ×6, GET /v1/vpn/connections?limit=20 (page 1, page 2, ?status=active), GET
//   /v1/vpn/connections/:id ×4, GET /v1/vpn/servers, GET /v1/users?limit=20, GET /v1/webhooks,
//   POST /v1/vpn/connections ×2 (10 % creates), PUT /v1/vpn/connections/:id ×2.
// One access token, no login (bcrypt has its own figures in the core bench).
//
// Figures, each beside its goal: throughput; p50, p90, p99 (goal < 150 ms) and max; the server's RSS every 10 s of
// the run and after 30 s idle (goal < 200 MB at the end, and lower when idle); GET /v1/auth/me alone against the
// hand-written Fastify + pg route of bench/lib/baseline-server.ts, in rounds that alternate the two in this run
// (goal ≥ 0.8). Beside them, what the latency is made of: the latency per kind of request, and the database side
// sampled every 100 ms from pg_stat_activity (the server's connections busy, idle inside a transaction, and waiting
// on a lock, with the statements that wait). The load average is printed with the figures: on a shared machine
// compare runs made in the same conditions.
import { loadavg } from 'node:os';
import autocannon from 'autocannon';
import pg from 'pg';
import { ownEnterpriseOrganization } from './lib/organization.js';
import type { BenchContext } from './lib/plugin.js';
import { freePort, startServerProcess, type ServerHandle } from './lib/processes.js';
import { fmt } from './lib/report.js';
import { median, percentile } from './lib/stats.js';

const MIX_SECONDS = Number(process.env.BENCH_MIXED_SECONDS ?? 60);
const IDLE_SECONDS = 30;
const SEEDED_CONNECTIONS = 40;
const GOAL_P99_MS = 150;
const GOAL_RSS_MB = 200;
const GOAL_ME_RATIO = 0.8;
/** Rounds of GET /v1/auth/me, each a load on the server then one on the baseline. */
const PAIRED_ROUNDS = 3;
const PAIRED_SECONDS = 10;
/** The ORM pool's size on PostgreSQL (server/db/orm.ts). */
const APP_POOL_MAX = 10;

interface Conn {
  sentAt?: number;
  n?: number;
  vpnIds?: string[];
}

type Req = {
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  body?: string;
  headers?: Record<string, string>;
  setupRequest?: (req: Req, context: Conn) => Req;
  onResponse?: (status: number, body: string, context: Conn) => void;
};

const latencies = new Map<string, number[]>();

function timed(name: string, req: Req): Req {
  const list = latencies.get(name) ?? [];
  latencies.set(name, list);
  return {
    ...req,
    setupRequest: (r, c) => {
      c.sentAt = performance.now();
      return req.setupRequest ? req.setupRequest(r, c) : r;
    },
    onResponse: (status, body, c) => {
      if (c.sentAt !== undefined) list.push(performance.now() - c.sentAt);
      req.onResponse?.(status, body, c);
    },
  };
}

let conns = 0;

function mixRequests(seeded: string[]): Req[] {
  const json = { 'content-type': 'application/json' };
  // Each load connection reads and changes connections of its own slice of the seeded ones (a team works on its
  // own devices), spread so that the 50 load connections touch all 40.
  const pick = (c: Conn) => {
    c.vpnIds ??= ((start) => [0, 1, 2, 3].map((k) => seeded[(start + k * 7) % seeded.length]!))(conns++);
    c.n = (c.n ?? 0) + 1;
    return c.vpnIds[c.n % c.vpnIds.length]!;
  };
  const get = (path: string): Req => ({ method: 'GET', path });
  const me = timed('GET /auth/me', get('/v1/auth/me'));
  const page1 = timed('GET /vpn/connections', get('/v1/vpn/connections?page=1&limit=20'));
  const page2 = timed('GET /vpn/connections page 2', get('/v1/vpn/connections?page=2&limit=20'));
  const active = timed('GET /vpn/connections?status', get('/v1/vpn/connections?limit=20&status=active'));
  const one = timed('GET /vpn/connections/:id', {
    method: 'GET',
    path: '/v1/vpn/connections/none',
    setupRequest: (req, c) => ({ ...req, path: `/v1/vpn/connections/${pick(c)}` }),
  });
  const servers = timed('GET /vpn/servers', get('/v1/vpn/servers'));
  const users = timed('GET /users', get('/v1/users?limit=20'));
  const webhooks = timed('GET /webhooks', get('/v1/webhooks'));
  const create = timed('POST /vpn/connections', {
    method: 'POST',
    path: '/v1/vpn/connections',
    headers: json,
    body: JSON.stringify({ name: 'Mixed laptop', location: 'us-east', protocol: 'wireguard' }),
  });
  const update = timed('PUT /vpn/connections/:id', {
    method: 'PUT',
    path: '/v1/vpn/connections/none',
    headers: json,
    setupRequest: (req, c) => ({
      ...req,
      path: `/v1/vpn/connections/${pick(c)}`,
      body: JSON.stringify({ name: `Mixed device ${(c.n ?? 0) % 2}` }),
    }),
  });
  return [
    me,
    page1,
    one,
    me,
    create,
    servers,
    one,
    me,
    update,
    page2,
    me,
    users,
    one,
    create,
    me,
    active,
    webhooks,
    one,
    update,
    me,
  ];
}

/** The server's connections as PostgreSQL sees them, sampled every 100 ms while the load runs. */
class ActivitySampler {
  samples = 0;
  busy = 0;
  idleInTx = 0;
  lockWaits = 0;
  saturated = 0;
  readonly waiting = new Map<string, number>();
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  constructor(private readonly client: pg.Client) {}

  start() {
    this.timer = setInterval(() => {
      this.running ??= this.sample().finally(() => (this.running = undefined));
    }, 100);
  }

  async stop() {
    clearInterval(this.timer);
    await this.running;
  }

  private async sample() {
    const { rows } = await this.client.query<{ state: string | null; wait: string | null; query: string }>(
      `select state, wait_event_type as wait, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) as query
         from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'
          and application_name <> 'pgboss'`,
    );
    this.samples++;
    const busy = rows.filter((r) => r.state && r.state !== 'idle');
    this.busy += busy.length;
    this.idleInTx += busy.filter((r) => r.state?.startsWith('idle in transaction')).length;
    if (busy.length >= APP_POOL_MAX) this.saturated++;
    for (const r of busy) {
      if (r.wait !== 'Lock') continue;
      this.lockWaits++;
      this.waiting.set(r.query, (this.waiting.get(r.query) ?? 0) + 1);
    }
  }
}

const load = () =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

export async function bench(ctx: BenchContext): Promise<void> {
  ctx.report.section(
    `Mixed /v1 load (20-request cycle, 10 % creates), ${ctx.settings.connections} connections, ${MIX_SECONDS} s, ` +
      'a server of its own',
  );
  const { token } = await ownEnterpriseOrganization(ctx, 'mixed');
  const headers = { ...ctx.headers, authorization: `Bearer ${token}` };
  const server: ServerHandle = await ctx.startServer();
  const db = new pg.Client({ connectionString: ctx.databaseUrl });
  await db.connect();
  try {
    const api = async <T>(method: string, path: string, body?: unknown) => {
      const res = await fetch(`${server.baseUrl}${path}`, {
        method,
        headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: (await res.json()) as T };
    };
    const seeded: string[] = [];
    for (let i = 0; i < SEEDED_CONNECTIONS; i++) {
      const c = await api<{ connection: { id: string } }>('POST', '/v1/vpn/connections', {
        name: `Mixed device ${i}`,
        location: 'eu-central',
        protocol: 'wireguard',
      });
      if (c.status !== 201) throw new Error(`creating a connection answered ${c.status}`);
      seeded.push(c.body.connection.id);
    }
    const requests = mixRequests(seeded);
    // A short warm-up: every route compiled, the pools filled.
    await autocannon({
      url: server.baseUrl,
      headers,
      connections: ctx.settings.connections,
      duration: Math.max(2, ctx.settings.warmupSec),
      requests,
    });
    latencies.forEach((list) => (list.length = 0));

    const rss: string[] = [];
    const sampler = new ActivitySampler(db);
    const loadBefore = load();
    const rssBefore = server.rssMb();
    const every10s = setInterval(() => rss.push(fmt(server.rssMb(), 0)), 10_000);
    sampler.start();
    const result = await autocannon({
      url: server.baseUrl,
      headers,
      connections: ctx.settings.connections,
      duration: MIX_SECONDS,
      timeout: 30,
      requests,
    });
    clearInterval(every10s);
    await sampler.stop();
    const loadAfter = load();
    const rssEnd = server.rssMb();
    const idle: string[] = [];
    for (let s = 0; s < IDLE_SECONDS; s += 10) {
      await new Promise((r) => setTimeout(r, 10_000));
      idle.push(fmt(server.rssMb(), 0));
    }
    const rssIdle = server.rssMb();

    ctx.report.note(`load average (1, 5, 15 min): ${loadBefore} before the run, ${loadAfter} after`);
    const errors = result.non2xx + result.errors;
    ctx.report.figure('throughput (2xx)', result['2xx'] / result.duration, 'req/s', {
      target: 'none (reported), 0 errors',
      met: errors === 0,
    });
    ctx.report.figure('  p50', result.latency.p50, 'ms');
    ctx.report.figure('  p90', result.latency.p90, 'ms');
    ctx.report.figure('  p99', result.latency.p99, 'ms', {
      target: `< ${GOAL_P99_MS} ms`,
      met: result.latency.p99 < GOAL_P99_MS,
    });
    ctx.report.figure('  max', result.latency.max, 'ms');
    if (errors) {
      const codes = Object.entries(result.statusCodeStats ?? {})
        .filter(([code]) => !code.startsWith('2'))
        .map(([code, s]) => `${code}: ${fmt(s.count)}`)
        .join(', ');
      ctx.report.note(`${fmt(result.non2xx)} non-2xx responses (${codes}), ${fmt(result.errors)} errors`);
    }
    ctx.report.note(`server RSS (MB): ${fmt(rssBefore, 0)} before, every 10 s ${rss.join(' → ')}`);
    ctx.report.figure('server RSS at the end of the run', rssEnd, 'MB', {
      target: `< ${GOAL_RSS_MB} MB`,
      met: rssEnd !== null && rssEnd < GOAL_RSS_MB,
    });
    ctx.report.figure(`server RSS after ${IDLE_SECONDS} s idle`, rssIdle, 'MB', {
      target: `< ${GOAL_RSS_MB} MB and below the end of the run`,
      met: rssIdle !== null && rssEnd !== null && rssIdle < GOAL_RSS_MB && rssIdle <= rssEnd,
    });
    ctx.report.note(`idle RSS every 10 s (MB): ${idle.join(' → ')}`);

    ctx.report.note('latency per kind of request (p50 / p99 / max, ms):');
    latencies.forEach((list) => list.sort((a, b) => a - b));
    for (const [name, list] of [...latencies].sort((a, b) => percentile(b[1], 99) - percentile(a[1], 99))) {
      const figures = [50, 99, 100].map((p) => fmt(percentile(list, p))).join(' / ');
      console.log(`     ${name.padEnd(30)} ${figures.padStart(22)}   (${fmt(list.length)} requests)`);
    }
    const per = (n: number) => fmt(n / Math.max(1, sampler.samples), 2);
    ctx.report.note(
      `database side, ${sampler.samples} samples of pg_stat_activity: the server's connections busy ${per(sampler.busy)} ` +
        `on average (pool of ${APP_POOL_MAX}; all busy in ${fmt((100 * sampler.saturated) / Math.max(1, sampler.samples))} % ` +
        `of samples), idle inside a transaction ${per(sampler.idleInTx)}, waiting on a lock ${per(sampler.lockWaits)}`,
    );
    for (const [query, n] of [...sampler.waiting].sort((a, b) => b[1] - a[1]).slice(0, 5))
      console.log(`     waits on a lock in ${fmt(n)} samples: ${query}`);

    // GET /v1/auth/me alone, the server and the baseline in turn, in the same conditions.
    const port = await freePort();
    const baseline = await startServerProcess({
      name: 'baseline',
      script: 'bench/lib/baseline-server.ts',
      port,
      env: { DATABASE_URL: ctx.databaseUrl, JWT_SECRET: ctx.jwtSecret, PORT: String(port) },
    });
    try {
      const meLoad = async (url: string) => {
        const r = await autocannon({
          url: `${url}/v1/auth/me`,
          headers,
          connections: ctx.settings.connections,
          duration: PAIRED_SECONDS,
          warmup: { connections: ctx.settings.connections, duration: 1 },
        });
        return r['2xx'] / r.duration;
      };
      const ratios: number[] = [];
      for (let round = 0; round < PAIRED_ROUNDS; round++) {
        const ours = await meLoad(server.baseUrl);
        const base = await meLoad(baseline.baseUrl);
        ratios.push(ours / base);
        ctx.report.note(
          `GET /v1/auth/me round ${round + 1}: ${fmt(ours)} req/s against ${fmt(base)} req/s (load ${load()})`,
        );
      }
      ctx.report.figure('GET /v1/auth/me ÷ Fastify + pg route (median)', median(ratios), '', {
        target: `≥ ${GOAL_ME_RATIO}`,
        met: median(ratios) >= GOAL_ME_RATIO,
      });
    } finally {
      await baseline.stop();
    }
    const warnings = server.warnings();
    if (warnings.length)
      ctx.report.note(`the server logged ${warnings.length} warnings; first: ${warnings[0]!.slice(0, 300)}`);
  } finally {
    await db.end();
    await server.stop();
  }
}
