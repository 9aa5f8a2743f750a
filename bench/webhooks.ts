// Webhook delivery figures for `npm run bench` (run alone with `npm run bench -- webhooks`):
//   - deliveries per second from the outbox to a local receiver (target ≥ 500/s on 2 cores),
//   - delay from the commit of an event to the receiver getting its first attempt (target p50 < 200 ms),
//   - a recovery (`POST /webhooks/:id/recover`) of 10,000 failed deliveries to a local receiver: deliveries per
//     second (target ≥ 500/s), and meanwhile the commit-to-attempt delay of another webhook's events (target
//     p50 < 200 ms): a recovery must not hold up other webhooks.
//
// The receiver listens on loopback, which a production server refuses to deliver to (SSRF rules), so this bench
// runs its own server process (NODE_ENV=development, WEBHOOK_ALLOW_PRIVATE_TARGETS=true) on its own PostgreSQL
// database (<bench database>_webhooks): the production server under test would otherwise claim the same
// deliveries and refuse them. Events are committed straight into the outbox table by a separate connection, as
// any module's transaction does, so the figures are those of the relay and the delivery worker alone.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { recreatePostgresDatabase } from './lib/database.js';
import type { BenchContext } from './lib/plugin.js';
import { developmentServerEnv, SERVER_SCRIPT, freePort, startServerProcess } from './lib/processes.js';
import { fmt } from './lib/report.js';
import { percentile } from './lib/stats.js';

const TARGET_RATE = 500;
const TARGET_P50_MS = 200;
/** Events committed for the throughput figure (one webhook each: one delivery per event). */
const THROUGHPUT_EVENTS = Number(process.env.BENCH_WEBHOOK_EVENTS ?? 10_000);
/** Events committed one at a time for the latency figure. */
const LATENCY_SAMPLES = Number(process.env.BENCH_WEBHOOK_LATENCY_SAMPLES ?? 200);
/** Failed deliveries recovered at once. */
const RECOVERY_DELIVERIES = Number(process.env.BENCH_WEBHOOK_RECOVERY ?? 10_000);
/** Pause between two events of the other webhook while the recovery runs. */
const RECOVERY_PROBE_EVERY_MS = 50;

interface Receiver {
  url: string;
  count: number;
  /** Resolves when the event with this id first arrives, with the arrival time (performance.now()). */
  arrival(eventId: string): Promise<number>;
  /** Resolves when `n` requests have arrived in total, with the time the n-th arrived. */
  reach(n: number): Promise<number>;
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const waiting = new Map<string, (t: number) => void>();
  const seen = new Map<string, number>();
  const counts: { n: number; wanted: number; resolve?: (t: number) => void } = { n: 0, wanted: Infinity };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const t = performance.now();
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      counts.n++;
      const id = String(req.headers['webhook-id'] ?? '');
      if (!seen.has(id)) seen.set(id, t);
      waiting.get(id)?.(t);
      waiting.delete(id);
      if (counts.n >= counts.wanted) counts.resolve?.(t);
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    get count() {
      return counts.n;
    },
    arrival(eventId) {
      const t = seen.get(eventId);
      if (t !== undefined) return Promise.resolve(t);
      return new Promise((ok) => waiting.set(eventId, ok));
    },
    reach(n) {
      if (counts.n >= n) return Promise.resolve(performance.now());
      counts.wanted = n;
      return new Promise((ok) => (counts.resolve = ok));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}

function eventId(): string {
  const alphabet = '0123456789abcdefghijklmnopqrstuvwxyz';
  let out = '';
  for (const b of randomBytes(20)) out += alphabet[b % 36];
  return `evt_${out}`;
}

/** `INSERT`s events in one transaction, as a module's change does; resolves after COMMIT with the commit time. */
async function commitEvents(client: pg.Client, orgId: string, ids: string[]): Promise<number> {
  await client.query('begin');
  for (let i = 0; i < ids.length; i += 1000) {
    const chunk = ids.slice(i, i + 1000);
    const values: unknown[] = [];
    const rows = chunk.map((id, j) => {
      values.push(id, orgId, JSON.stringify({ object: { id: `usr_bench${i + j}`, name: 'Bench' } }));
      const k = j * 3;
      return `($${k + 1}, $${k + 2}, 'user.updated', $${k + 3}::json, now(), null)`;
    });
    await client.query(
      `insert into events (id, organization_id, type, data, created_at, dispatched_at) values ${rows.join(', ')}`,
      values,
    );
  }
  await client.query('commit');
  return performance.now();
}

/** `n` deliveries of `webhookId` that failed for good (as a receiver outage leaves them), created just now. */
async function insertFailedDeliveries(client: pg.Client, webhookId: string, orgId: string, n: number) {
  for (let i = 0; i < n; i += 1000) {
    const values: unknown[] = [];
    const rows = Array.from({ length: Math.min(1000, n - i) }, (_, j) => {
      const evt = eventId();
      const body = JSON.stringify({
        id: evt,
        type: 'user.created',
        created_at: new Date().toISOString(),
        organization_id: orgId,
        data: { object: { id: `usr_recovered${i + j}` } },
      });
      values.push(`del_${eventId().slice(4)}`, webhookId, orgId, evt, body);
      const k = j * 5;
      return `($${k + 1}, now(), now(), $${k + 2}, $${k + 3}, $${k + 4}, 'user.created', $${k + 5}, 'failed', 10, now(), 503, 'Receiver answered 503')`;
    });
    await client.query(
      `insert into webhook_deliveries (id, created_at, updated_at, webhook_id, organization_id, event_id, event_type,
         payload, status, attempts, fair_at, response_status, last_error) values ${rows.join(', ')}`,
      values,
    );
  }
}

export async function bench(ctx: BenchContext): Promise<void> {
  const { report } = ctx;
  report.section('Webhooks (PostgreSQL, own server and database)');
  const dbUrl = new URL(ctx.databaseUrl);
  dbUrl.pathname = `${dbUrl.pathname}_webhooks`;
  await recreatePostgresDatabase(dbUrl.toString());

  const receiver = await startReceiver();
  const owner = { email: 'bench-webhooks@example.test', password: randomBytes(12).toString('base64url') };
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-webhooks-'));
  const server = await startServerProcess({
    name: 'webhooks server',
    script: SERVER_SCRIPT,
    port,
    healthPath: '/readyz',
    env: developmentServerEnv(port, {
      DATABASE_URL: dbUrl.toString(),
      DATA_DIR: dataDir,
      JWT_SECRET: randomBytes(48).toString('base64url'),
      BCRYPT_COST: '10',
      AUTH_RATE_LIMIT: '1000000',
      OWNER_EMAIL: owner.email,
      OWNER_PASSWORD: owner.password,
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    }),
  });
  const client = new pg.Client({ connectionString: dbUrl.toString() });
  await client.connect();
  try {
    const post = async (path: string, body: unknown, token?: string) => {
      const res = await fetch(`${server.baseUrl}${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
      });
      const json = (await res.json()) as {
        token?: string;
        user?: { organization_id?: string };
        webhook?: { id: string };
        deliveries_queued?: number;
      };
      if (!res.ok) throw new Error(`POST ${path} answered ${res.status}: ${JSON.stringify(json)}`);
      return json;
    };
    const login = await post('/v1/auth/login', owner);
    const token = login.token!;
    const orgId = login.user!.organization_id!;
    await post('/v1/webhooks', { url: receiver.url, events: ['user.updated'] }, token);

    // Latency: one event per commit, the next once the previous one arrived.
    const delays: number[] = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      const id = eventId();
      const committed = await commitEvents(client, orgId, [id]);
      delays.push((await receiver.arrival(id)) - committed);
    }
    delays.sort((a, b) => a - b);
    const p50 = percentile(delays, 50);
    report.figure(`commit to first attempt, p50 (${LATENCY_SAMPLES} events, one at a time)`, p50, 'ms', {
      target: `< ${TARGET_P50_MS} ms`,
      met: p50 < TARGET_P50_MS,
    });
    report.figure('  p90', percentile(delays, 90), 'ms');
    report.figure('  p99', percentile(delays, 99), 'ms');

    // Throughput: a burst of events committed at once, until the receiver has every delivery.
    const before = receiver.count;
    const ids = Array.from({ length: THROUGHPUT_EVENTS }, eventId);
    const committed = await commitEvents(client, orgId, ids);
    const last = await receiver.reach(before + THROUGHPUT_EVENTS);
    const rate = (THROUGHPUT_EVENTS * 1000) / (last - committed);
    report.figure(
      `deliveries to a local receiver (${fmt(THROUGHPUT_EVENTS)} events in one commit)`,
      rate,
      '/s',
      {
        target: `≥ ${TARGET_RATE}/s on 2 cores (${ctx.settings.cores} here)`,
        met: rate >= TARGET_RATE,
      },
    );
    // Until every outcome is recorded as well.
    for (;;) {
      const r = await client.query<{ n: string }>(
        `select count(*) as n from webhook_deliveries where status = 'success'`,
      );
      if (Number(r.rows[0]!.n) >= before + THROUGHPUT_EVENTS) break;
      await new Promise((ok) => setTimeout(ok, 20));
    }
    const recorded = performance.now();
    report.figure(
      '  including recording every outcome',
      (THROUGHPUT_EVENTS * 1000) / (recorded - committed),
      '/s',
    );
    report.figure('  webhooks server RSS', server.rssMb(), 'MB');
    const duplicates = receiver.count - before - THROUGHPUT_EVENTS;
    if (duplicates !== 0) report.note(`the receiver got ${duplicates} more requests than deliveries`);

    // Recovery: 10,000 failed deliveries of a second webhook (its receiver was down) are recovered at once, while
    // the first webhook keeps receiving one event every RECOVERY_PROBE_EVERY_MS.
    const recovering = await startReceiver();
    try {
      const created = await post('/v1/webhooks', { url: recovering.url, events: ['user.created'] }, token);
      const recoveringId = created.webhook!.id;
      const since = new Date(Date.now() - 60_000);
      await insertFailedDeliveries(client, recoveringId, orgId, RECOVERY_DELIVERIES);
      const probes: Promise<number>[] = [];
      let probing = true;
      const probeLoop = (async () => {
        while (probing) {
          const id = eventId();
          const committedAt = await commitEvents(client, orgId, [id]);
          probes.push(receiver.arrival(id).then((t) => t - committedAt));
          await new Promise((ok) => setTimeout(ok, RECOVERY_PROBE_EVERY_MS));
        }
      })();
      await new Promise((ok) => setTimeout(ok, 200)); // the other webhook's traffic is flowing
      const started = performance.now();
      const recovered = await post(
        `/v1/webhooks/${recoveringId}/recover`,
        { since: since.toISOString() },
        token,
      );
      if (recovered.deliveries_queued !== RECOVERY_DELIVERIES)
        throw new Error(`recover queued ${recovered.deliveries_queued}, not ${RECOVERY_DELIVERIES}`);
      const answered = performance.now();
      const done = await recovering.reach(RECOVERY_DELIVERIES);
      probing = false;
      await probeLoop;
      const during = (await Promise.all(probes)).sort((a, b) => a - b);
      const recoveryRate = (RECOVERY_DELIVERIES * 1000) / (done - started);
      report.figure(
        `recovery of ${fmt(RECOVERY_DELIVERIES)} failed deliveries (request to last arrival)`,
        recoveryRate,
        '/s',
        { target: `≥ ${TARGET_RATE}/s`, met: recoveryRate >= TARGET_RATE },
      );
      report.figure('  the recover request itself (queues them all)', answered - started, 'ms');
      report.figure(
        '  from its answer to the last arrival',
        (RECOVERY_DELIVERIES * 1000) / (done - answered),
        '/s',
      );
      const duringP50 = percentile(during, 50);
      report.figure(
        `  another webhook meanwhile: commit to first attempt, p50 (${during.length} events)`,
        duringP50,
        'ms',
        { target: `< ${TARGET_P50_MS} ms`, met: duringP50 < TARGET_P50_MS },
      );
      report.figure('    p90', percentile(during, 90), 'ms');
      report.figure('    max', during[during.length - 1] ?? 0, 'ms');
      const extra = recovering.count - RECOVERY_DELIVERIES;
      if (extra !== 0) report.note(`the recovering receiver got ${extra} more requests than deliveries`);
    } finally {
      await recovering.close();
    }
    const warnings = server.warnings();
    if (warnings.length)
      report.note(`webhooks server logged ${warnings.length} warnings: ${warnings[0]!.slice(0, 200)}`);
  } finally {
    await client.end();
    await server.stop();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
