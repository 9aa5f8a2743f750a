// Test tier: server
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { usingPostgres } from '../support/env.js';
import { http } from '../support/http.js';
import { freePort } from '../support/ports.js';
import { waitFor, waitForServerStart } from '../support/wait.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../support/scratch-database.js';

const ROOT = resolve(import.meta.dirname, '../..');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Crash recovery of jobs (docs/operating.md, "Jobs and crash recovery"): a server process is killed (SIGKILL) while it holds
 * jobs (`active` in the queue: their handlers wait on rows this test keeps locked, as a slow provisioning step
 * would); another process started on the same database runs them again once their lease lapses, and each job's
 * effects happen exactly once. PostgreSQL only: PGlite is a single-process database (one server per data
 * directory), so there is no other process to take over.
 */
describe('jobs held by a killed process', function () {
  this.timeout(240_000);
  let dir: string;
  let scratch: ScratchDatabase | undefined;
  let client: pg.Client | undefined;
  const children: ChildProcess[] = [];

  before(async function () {
    if (!usingPostgres) {
      this.skip(); // PGlite is single-process: no second process can take over a dead one's jobs.
    }
    dir = mkdtempSync(join(tmpdir(), 'jobs-crash-'));
    scratch = await ownPostgresDatabase('jobs_crash');
  });

  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await client?.end().catch(() => {});
    if (dir) rmSync(dir, { recursive: true, force: true });
    await scratch?.drop();
  });

  const owner = { email: 'jobs-crash@example.test', password: randomBytes(12).toString('base64url') };
  const jwtSecret = randomBytes(32).toString('hex');

  async function startServer(port: number): Promise<{ baseUrl: string; proc: ChildProcess }> {
    const proc = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        NODE_ENV: 'development',
        HOST: '127.0.0.1',
        PORT: String(port),
        DATA_DIR: join(dir, 'data'),
        DATABASE_URL: scratch!.url,
        JWT_SECRET: jwtSecret,
        BCRYPT_COST: '4',
        OWNER_EMAIL: owner.email,
        OWNER_PASSWORD: owner.password,
        ORGANIZATION_NAME: 'Crash Jobs Co',
        // Long enough to create everything before the first job is due.
        PROVISIONING_DELAY_MS: '3000',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(proc);
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const baseUrl = `http://127.0.0.1:${port}`;
    await waitForServerStart(baseUrl, proc, () => stderr);
    return { baseUrl, proc };
  }

  const activeJobs = async (c: pg.Client) =>
    (
      await c.query<{ id: string; name: string }>(
        `select id, name from pgboss.job where name in ('vpn.activate', 'databases.ready') and state = 'active'`,
      )
    ).rows;

  it('runs them again on another process, each with its effects once', async () => {
    const first = await startServer(await freePort());
    const login = await http(first.baseUrl, 'POST', '/v1/auth/login', { body: owner });
    expect(login.status).to.equal(200);
    const token = login.body.token as string;

    // A webhook for vpn.connected: a second activation would show as a second delivery.
    const hook = await http(first.baseUrl, 'POST', '/v1/webhooks', {
      token,
      body: { url: 'http://127.0.0.1:9/hook', events: ['vpn.connected'] },
    });
    expect(hook.status).to.equal(201);

    const connections: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await http(first.baseUrl, 'POST', '/v1/vpn/connections', {
        token,
        body: { name: `laptop-${i}`, location: 'eu-central', protocol: 'wireguard' },
      });
      expect(res.status).to.equal(201);
      connections.push(res.body.connection.id as string);
    }
    const database = await http(first.baseUrl, 'POST', '/v1/databases', {
      token,
      body: { name: 'crash-db', engine: 'postgresql' },
    });
    expect(database.status).to.equal(201);
    const databaseId = database.body.database.id as string;

    // Hold the rows the jobs change: their handlers wait on these locks, so the jobs stay claimed (`active`).
    client = new pg.Client({ connectionString: scratch!.url });
    await client.connect();
    await client.query('begin');
    await client.query(`select id from vpn_connections where id = any($1) for update`, [connections]);
    await client.query(`select id from databases where id = $1 for update`, [databaseId]);
    const lockedAt = Date.now();

    const reader = new pg.Client({ connectionString: scratch!.url });
    await reader.connect();
    let held: { id: string; name: string }[];
    let killedAt: number | undefined;
    try {
      held = await waitFor(
        'the first process to claim the jobs',
        async () => {
          const rows = await activeJobs(reader);
          return rows.some((r) => r.name === 'vpn.activate') && rows.some((r) => r.name === 'databases.ready')
            ? rows
            : null;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      // Longer than a lease: the heartbeat keeps a slow job of a live process claimed.
      await sleep(Math.max(0, lockedAt + 17_000 - Date.now()));
      const stillHeld = await activeJobs(reader);
      expect(stillHeld.map((r) => r.id)).to.include.members(held.map((r) => r.id));
      held = stillHeld;

      const exited = new Promise((done) => first.proc.once('exit', done));
      first.proc.kill('SIGKILL');
      await exited;
      killedAt = Date.now();
      // At the kill, the dead process still holds them.
      expect((await activeJobs(reader)).map((r) => r.id)).to.include.members(held.map((r) => r.id));
    } finally {
      await reader.end();
    }
    await client.query('rollback');
    await client.end();
    client = undefined;

    const second = await startServer(await freePort());
    // The bound of docs/jobs.md ("Crash recovery: the heartbeat"): within 30 s of the death, or of the start of a
    // process when none was running.
    const recoverBy = Math.max(killedAt ?? 0, Date.now()) + 30_000;
    try {
      const login2 = await http(second.baseUrl, 'POST', '/v1/auth/login', { body: owner });
      const token2 = login2.body.token as string;
      await waitFor(
        'every connection active and the database running on the second process',
        async () => {
          const list = await http(second.baseUrl, 'GET', '/v1/vpn/connections?limit=20', { token: token2 });
          const db = await http(second.baseUrl, 'GET', `/v1/databases/${databaseId}`, { token: token2 });
          return (
            list.body.connections.length === 5 &&
            list.body.connections.every((c: { status: string }) => c.status === 'active') &&
            db.body.database.status === 'running'
          );
        },
        { timeoutMs: 90_000, intervalMs: 250 },
      );

      const check = new pg.Client({ connectionString: scratch!.url });
      await check.connect();
      try {
        // Each held job ran again as a retry of the same job, and completed.
        const jobs = await check.query<{ id: string; state: string; retry_count: number; started_on: Date }>(
          `select id, state, retry_count, started_on from pgboss.job where id = any($1::uuid[])`,
          [held.map((r) => r.id)],
        );
        expect(jobs.rows).to.have.length(held.length);
        for (const j of jobs.rows) {
          expect(j.state, `job ${j.id}`).to.equal('completed');
          expect(j.retry_count, `job ${j.id}`).to.be.at.least(1);
          // The attempt that completed started within the bound.
          expect(j.started_on.getTime(), `job ${j.id} started again`).to.be.below(recoverBy);
        }
        // One vpn.connected event per connection, one delivery of each to the webhook.
        const events = await check.query<{ id: string; n: number }>(
          `select data->'object'->>'id' as id, count(*)::int as n from events
            where type = 'vpn.connected' group by 1`,
        );
        expect(Object.fromEntries(events.rows.map((r) => [r.id, r.n]))).to.deep.equal(
          Object.fromEntries(connections.map((id) => [id, 1])),
        );
        await waitFor(
          'a delivery per event',
          async () =>
            Number(
              (
                await check.query<{ n: number }>(
                  `select count(*)::int as n from webhook_deliveries where event_type = 'vpn.connected'`,
                )
              ).rows[0]!.n,
            ) === 5,
          { timeoutMs: 30_000, intervalMs: 250 },
        );
        const deliveries = await check.query<{ event_id: string; n: number }>(
          `select event_id, count(*)::int as n from webhook_deliveries
            where event_type = 'vpn.connected' group by 1`,
        );
        expect(deliveries.rows.map((r) => r.n)).to.deep.equal([1, 1, 1, 1, 1]);
        // The database became running once: one open billable period.
        const periods = await check.query<{ n: number }>(
          `select count(*)::int as n from database_usage_periods where database_id = $1`,
          [databaseId],
        );
        expect(periods.rows[0]!.n).to.equal(1);
      } finally {
        await check.end();
      }
    } finally {
      second.proc.kill('SIGTERM');
      await new Promise((done) => second.proc.once('exit', done));
    }
  });
});
