// Memory and latency under a mixed read/write load on /v1 (alone: `npm run bench -- scale-mixed`), on a server of
// its own (the built server as `npm start` runs it, same settings as the others, plus the inspector on loopback so
// that the bench can force a full garbage collection and read the live heap).
//
// The mix, per connection, repeats a cycle of 30 requests (README, "Memory under load"):
//   80 % reads  GET /v1/auth/me ×6, GET /v1/vpn/connections ×5, GET /v1/databases ×5, GET /v1/hosting/sites ×4,
//               GET /v1/users/:id ×4
//   20 % writes POST /v1/vpn/connections then DELETE of it (its activation job runs too), PUT /v1/databases/:id
//               (backup retention), PUT /v1/hosting/sites/:id (environment variables), POST /v1/webhooks then
//               DELETE of it.
// No login: bcrypt runs on worker threads and the core bench measures it; a token is refreshed far less often than
// once per 30 requests. Every write is undone or rewrites the same rows, so the organization stays within any plan
// limit and the lists stay the same size over the run.
//
// Figures: req/s, p50, p99 (target < 50 ms), RSS before and after (target < 200 MB), and the live heap after a
// forced full collection before and after (target: flat, within 10 MB).
import { readdirSync } from 'node:fs';
import autocannon from 'autocannon';
import { ownEnterpriseOrganization } from './lib/organization.js';
import type { BenchContext } from './lib/plugin.js';
import { freePort, type ServerHandle } from './lib/processes.js';
import { fmt } from './lib/report.js';

const TARGET_P99_MS = 50;
const TARGET_RSS_MB = 200;
const TARGET_HEAP_GROWTH_MB = 10;
/** Rows each connection's writes go to (shared by several connections, as a team shares its resources). */
const ROWS = 10;
/** Connections of the organization listed by the reads, beside the ones the writes add and remove. */
const SEEDED_CONNECTIONS = 20;

/** Records the process's garbage collections (count and pause time per kind) from now on. */
const WATCH_GC = `(() => {
  const gc = (globalThis.__benchGc = { minor: [0, 0], major: [0, 0], other: [0, 0], longest: 0 });
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = e.detail.kind === 1 ? 'minor' : e.detail.kind === 4 ? 'major' : 'other';
      gc[kind][0]++;
      gc[kind][1] += e.duration;
      gc.longest = Math.max(gc.longest, e.duration);
    }
  }).observe({ entryTypes: ['gc'] });
})()`;
const GC_SUMMARY = `(() => {
  const g = globalThis.__benchGc, f = (k) => g[k][0] + ' ' + k + ' (' + Math.round(g[k][1]) + ' ms)';
  return [f('minor'), f('major'), f('other')].join(', ') + ', longest pause ' + Math.round(g.longest) + ' ms';
})()`;
const SAMPLE = `(() => {
  const m = process.memoryUsage(), mb = (n) => Math.round(n / 1048576);
  return 'rss ' + mb(m.rss) + ' heapTotal ' + mb(m.heapTotal) + ' heapUsed ' + mb(m.heapUsed) + ' external ' +
    mb(m.external) + ' arrayBuffers ' + mb(m.arrayBuffers);
})()`;

/** Threads of a process (the main one, libuv's pool, V8's helpers, worker threads). */
function threads(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/task`).length;
  } catch {
    return 0;
  }
}

interface Me {
  user: { id: string };
}

/** Drives a Node process through its inspector (Chrome DevTools Protocol over WebSocket). */
class Inspector {
  private seq = 0;
  private readonly pending = new Map<number, (result: unknown) => void>();
  private constructor(private readonly ws: WebSocket) {
    ws.addEventListener('message', (e) => {
      const msg = JSON.parse(String(e.data)) as { id?: number; result?: unknown };
      if (msg.id !== undefined) this.pending.get(msg.id)?.(msg.result);
      if (msg.id !== undefined) this.pending.delete(msg.id);
    });
  }

  static async connect(port: number): Promise<Inspector> {
    const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
      webSocketDebuggerUrl: string;
    }[];
    const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl);
    await new Promise((ok, fail) => {
      ws.addEventListener('open', ok, { once: true });
      ws.addEventListener('error', fail, { once: true });
    });
    return new Inspector(ws);
  }

  send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.seq;
    return new Promise((ok) => {
      this.pending.set(id, ok as (r: unknown) => void);
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** MB used on the main thread's heap after two full collections (the second one frees what finalizers let go). */
  async liveHeapMb(): Promise<number> {
    await this.send('HeapProfiler.collectGarbage');
    await this.send('HeapProfiler.collectGarbage');
    const { usedSize } = await this.send<{ usedSize: number }>('Runtime.getHeapUsage');
    return usedSize / 1024 / 1024;
  }

  /** The value of an expression evaluated on the process's main thread. */
  async evaluate(expression: string): Promise<unknown> {
    const r = await this.send<{ result: { value?: unknown } }>('Runtime.evaluate', {
      expression,
      returnByValue: true,
    });
    return r.result.value;
  }

  close(): void {
    this.ws.close();
  }
}

async function seed(ctx: BenchContext, api: BenchContext['api']) {
  const me = await api<Me>('GET', '/v1/auth/me');
  if (me.status !== 200) throw new Error(`/v1/auth/me answered ${me.status}`);
  const databases: string[] = [];
  const sites: string[] = [];
  for (let i = 0; i < ROWS; i++) {
    const db = await api<{ database: { id: string } }>('POST', '/v1/databases', {
      name: `mixed-${i}`,
      engine: 'postgresql',
    });
    if (db.status !== 201) throw new Error(`creating a database answered ${db.status}`);
    databases.push(db.body.database.id);
    const site = await api<{ site: { id: string } }>('POST', '/v1/hosting/sites', {
      name: `Mixed site ${i}`,
      git_repo: 'https://github.com/acme/mixed',
      framework: 'nextjs',
      environment_variables: { API_URL: 'https://api.example.com' },
    });
    if (site.status !== 201) throw new Error(`creating a site answered ${site.status}`);
    sites.push(site.body.site.id);
  }
  for (let i = 0; i < SEEDED_CONNECTIONS; i++) {
    const c = await api('POST', '/v1/vpn/connections', {
      name: `Mixed device ${i}`,
      location: 'eu-central',
      protocol: 'wireguard',
    });
    if (c.status !== 201) throw new Error(`creating a connection answered ${c.status}`);
  }
  // The databases accept changes once provisioned.
  const deadline = Date.now() + 60_000;
  for (const id of databases) {
    for (;;) {
      const res = await api<{ database: { status: string } }>('GET', `/v1/databases/${id}`);
      if (res.body.database?.status === 'running') break;
      if (Date.now() > deadline) throw new Error('the created databases did not become running');
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return { userId: me.body.user.id, databases, sites };
}

interface Conn {
  slot?: number;
  /** When the connection's current request was set up (its requests go one at a time). */
  sentAt?: number;
  vpnId?: string;
  webhookId?: string;
  n?: number;
}

type Req = {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  body?: string;
  headers?: Record<string, string>;
  setupRequest?: (req: Req, context: Conn) => Req;
  onResponse?: (status: number, body: string, context: Conn) => void;
};

let slots = 0;

/** Latencies per kind of request, measured from the request's setup to its response. */
const latencies = new Map<string, number[]>();

/** The request, timed under `name`. */
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

function percentile(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;
}

function mixRequests(seeded: { userId: string; databases: string[]; sites: string[] }): Req[] {
  const json = { 'content-type': 'application/json' };
  const slot = (c: Conn) => (c.slot ??= slots++ % ROWS);
  const get = (path: string): Req => ({ method: 'GET', path });
  const me = get('/v1/auth/me');
  const vpn = get('/v1/vpn/connections?page=1&limit=20');
  const dbs = get('/v1/databases?page=1&limit=20');
  const sites = get('/v1/hosting/sites?page=1&limit=20');
  const user = get(`/v1/users/${seeded.userId}`);
  const createVpn: Req = {
    method: 'POST',
    path: '/v1/vpn/connections',
    headers: json,
    body: JSON.stringify({ name: 'Mixed laptop', location: 'us-east', protocol: 'wireguard' }),
    onResponse: (status, body, c) => {
      c.vpnId = status === 201 ? (JSON.parse(body) as { connection: { id: string } }).connection.id : 'none';
    },
  };
  const deleteVpn: Req = {
    method: 'DELETE',
    path: '/v1/vpn/connections/none',
    setupRequest: (req, c) => ({ ...req, path: `/v1/vpn/connections/${c.vpnId ?? 'none'}` }),
  };
  const putDb: Req = {
    method: 'PUT',
    path: '/v1/databases/none',
    headers: json,
    setupRequest: (req, c) => ({
      ...req,
      path: `/v1/databases/${seeded.databases[slot(c)]}`,
      body: JSON.stringify({ backup_retention: 7 + ((c.n = (c.n ?? 0) + 1) % 2) * 7 }),
    }),
  };
  const putSite: Req = {
    method: 'PUT',
    path: '/v1/hosting/sites/none',
    headers: json,
    setupRequest: (req, c) => ({
      ...req,
      path: `/v1/hosting/sites/${seeded.sites[slot(c)]}`,
      body: JSON.stringify({
        environment_variables: { API_URL: 'https://api.example.com', RUN: String(c.n ?? 0) },
      }),
    }),
  };
  const createWebhook: Req = {
    method: 'POST',
    path: '/v1/webhooks',
    headers: json,
    // A public address written as such (no DNS), for an event the mix never causes: no delivery is attempted.
    body: JSON.stringify({ url: 'https://93.184.215.14/hooks/mixed', events: ['database.backup.completed'] }),
    onResponse: (status, body, c) => {
      c.webhookId = status === 201 ? (JSON.parse(body) as { webhook: { id: string } }).webhook.id : 'none';
    },
  };
  const deleteWebhook: Req = {
    method: 'DELETE',
    path: '/v1/webhooks/none',
    setupRequest: (req, c) => ({ ...req, path: `/v1/webhooks/${c.webhookId ?? 'none'}` }),
  };
  const mix = [
    me,
    vpn,
    dbs,
    createVpn,
    sites,
    user,
    me,
    vpn,
    putDb,
    dbs,
    sites,
    user,
    me,
    deleteVpn,
    vpn,
    dbs,
    createWebhook,
    sites,
    me,
    user,
    vpn,
    putSite,
    dbs,
    me,
    sites,
    deleteWebhook,
    user,
    vpn,
    dbs,
    me,
  ];
  const names = new Map<Req, string>([
    [me, 'GET /auth/me'],
    [vpn, 'GET /vpn/connections'],
    [dbs, 'GET /databases'],
    [sites, 'GET /hosting/sites'],
    [user, 'GET /users/:id'],
    [createVpn, 'POST /vpn/connections'],
    [deleteVpn, 'DELETE /vpn/connections/:id'],
    [putDb, 'PUT /databases/:id'],
    [putSite, 'PUT /hosting/sites/:id'],
    [createWebhook, 'POST /webhooks'],
    [deleteWebhook, 'DELETE /webhooks/:id'],
  ]);
  const wrapped = new Map([...names].map(([req, name]) => [req, timed(name, req)]));
  return mix.map((req) => wrapped.get(req)!);
}

export async function bench(ctx: BenchContext): Promise<void> {
  const seconds = ctx.settings.durationSec * 4;
  ctx.report.section(
    `Mixed /v1 load (80 % reads, 20 % writes), ${ctx.settings.connections} connections, ${seconds} s ` +
      '(4 × BENCH_DURATION), a server of its own',
  );
  // An organization of its own: what the mix creates and leaves behind (the last cycle's connections and webhooks,
  // the seeded rows) stays out of the bench organization, whose lists the benches after this one count.
  const { token } = await ownEnterpriseOrganization(ctx, 'mixed');
  const headers = { ...ctx.headers, authorization: `Bearer ${token}` };
  const inspectPort = await freePort();
  const server: ServerHandle = await ctx.startServer({ NODE_OPTIONS: `--inspect=127.0.0.1:${inspectPort}` });
  const inspector = await Inspector.connect(inspectPort);
  try {
    const api: BenchContext['api'] = async (method, path, body, token) => {
      const sent: Record<string, string> = { ...headers };
      if (token) sent.authorization = `Bearer ${token}`;
      if (body !== undefined) sent['content-type'] = 'application/json';
      const res = await fetch(`${server.baseUrl}${path}`, {
        method,
        headers: sent,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: JSON.parse(text) as never };
    };
    const seeded = await seed(ctx, api);
    const requests = mixRequests(seeded);
    // A short warm-up (every route compiled, the pools filled), then the figures before the run.
    await autocannon({
      url: server.baseUrl,
      headers,
      connections: ctx.settings.connections,
      duration: Math.max(2, ctx.settings.warmupSec),
      requests,
    });
    const heapBefore = await inspector.liveHeapMb();
    const rssBefore = server.rssMb();

    latencies.forEach((list) => (list.length = 0));
    await inspector.evaluate(WATCH_GC);
    const timeline: string[] = [];
    const sampler = setInterval(() => {
      void inspector
        .evaluate(SAMPLE)
        .then((s) => timeline.push(`${String(s)} threads ${threads(server.pid)}`));
    }, 10_000);
    const run = autocannon({
      url: server.baseUrl,
      headers,
      connections: ctx.settings.connections,
      duration: seconds,
      timeout: 30,
      requests,
    });
    const result = await run;
    clearInterval(sampler);
    const gc = String(await inspector.evaluate(GC_SUMMARY));
    const rssAfter = server.rssMb();
    const peak = server.peakRssMb();
    const heapAfter = await inspector.liveHeapMb();

    const ok = result['2xx'];
    ctx.report.figure('throughput (2xx)', ok / result.duration, 'req/s');
    ctx.report.figure('  p50', result.latency.p50, 'ms');
    ctx.report.figure('  p99', result.latency.p99, 'ms', {
      target: `< ${TARGET_P99_MS} ms`,
      met: result.latency.p99 < TARGET_P99_MS,
    });
    ctx.report.figure('RSS before the run', rssBefore, 'MB');
    ctx.report.figure('RSS after the run', rssAfter, 'MB', {
      target: `< ${TARGET_RSS_MB} MB`,
      met: rssAfter !== null && rssAfter < TARGET_RSS_MB,
    });
    ctx.report.figure('  peak RSS', peak, 'MB', {
      target: `< ${TARGET_RSS_MB} MB`,
      met: peak !== null && peak < TARGET_RSS_MB,
    });
    ctx.report.figure('live heap after full GC, before', heapBefore, 'MB');
    ctx.report.figure('live heap after full GC, after', heapAfter, 'MB', {
      target: `flat (within ${TARGET_HEAP_GROWTH_MB} MB)`,
      met: heapAfter - heapBefore < TARGET_HEAP_GROWTH_MB,
    });
    if (result.non2xx || result.errors) {
      const codes = Object.entries(result.statusCodeStats ?? {})
        .filter(([code]) => !code.startsWith('2'))
        .map(([code, s]) => `${code}: ${fmt(s.count)}`)
        .join(', ');
      ctx.report.note(`${fmt(result.non2xx)} non-2xx responses (${codes}), ${fmt(result.errors)} errors`);
    }
    ctx.report.note('latency per kind of request (p50 / p99 / max, ms):');
    latencies.forEach((list) => list.sort((a, b) => a - b));
    const slowestFirst = [...latencies].sort((a, b) => percentile(b[1], 99) - percentile(a[1], 99));
    for (const [name, list] of slowestFirst) {
      const figures = [50, 99, 100].map((p) => fmt(percentile(list, p))).join(' / ');
      console.log(`     ${name.padEnd(28)} ${figures.padStart(20)}   (${fmt(list.length)} requests)`);
    }
    ctx.report.note(`garbage collection during the run: ${gc}`);
    ctx.report.note('memory every 10 s (MB):');
    for (const line of timeline) console.log(`     ${line}`);
    const warnings = server.warnings().filter((w) => !/Debugger|inspector|devtools|debugging/i.test(w));
    if (warnings.length)
      ctx.report.note(`the server logged ${warnings.length} warnings; first: ${warnings[0]!.slice(0, 300)}`);
  } finally {
    inspector.close();
    await server.stop();
  }
}
