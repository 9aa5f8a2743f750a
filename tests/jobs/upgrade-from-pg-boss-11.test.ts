// Test tier: process
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import PgBoss11 from 'pg-boss-11';
import { freePort } from '../support/ports.js';
import { waitFor, waitForServerStart } from '../support/wait.js';
import { ownPostgresDatabaseOnEveryPass, type ScratchDatabase } from '../support/scratch-database.js';

const ROOT = resolve(import.meta.dirname, '../..');

/**
 * The in-place upgrade of the job queue (docs/jobs.md, "Upgrading from pg-boss 11"): a database whose `pgboss`
 * schema was made by pg-boss 11, with jobs queued the way the server queued them then (queues with a 15 s expiry,
 * which stood for the lease, and no heartbeat), one of them claimed by a process that died before the upgrade. The
 * server started on it migrates the schema on start, and every one of those jobs runs: the queued ones at once, the
 * delayed one when due, the one held by the dead process once its expiry lapses, as a retry. PostgreSQL on both
 * passes: the server runs as a process of its own on the database.
 */
describe('job queue upgraded in place from pg-boss 11', function () {
  this.timeout(240_000);
  let dir: string;
  let scratch: ScratchDatabase;
  let server: ChildProcess | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'jobs-upgrade-'));
    scratch = await ownPostgresDatabaseOnEveryPass('jobs_upgrade');
  });

  after(async () => {
    if (server && server.exitCode === null && server.signalCode === null) {
      server.kill('SIGTERM');
      await new Promise((done) => server!.once('exit', done));
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    await scratch?.drop();
  });

  async function startServer(port: number): Promise<ChildProcess> {
    const proc = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        NODE_ENV: 'development',
        HOST: '127.0.0.1',
        PORT: String(port),
        DATA_DIR: join(dir, 'data'),
        DATABASE_URL: scratch.url,
        JWT_SECRET: randomBytes(32).toString('hex'),
        BCRYPT_COST: '4',
        OWNER_EMAIL: 'jobs-upgrade@example.test',
        OWNER_PASSWORD: randomBytes(12).toString('base64url'),
        ORGANIZATION_NAME: 'Upgrade Jobs Co',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    await waitForServerStart(`http://127.0.0.1:${port}`, proc, () => stderr);
    return proc;
  }

  it('runs the jobs queued before the upgrade, with the schema migrated on start', async () => {
    // The database as the server made it with pg-boss 11: its queues (retries, 15 s expiry) and jobs.
    const old = new PgBoss11({
      connectionString: scratch.url,
      schema: 'pgboss',
      supervise: false,
      schedule: false,
    });
    old.on('error', () => {});
    await old.start();
    const queueOptions = { retryLimit: 3, retryDelay: 1, retryBackoff: false, expireInSeconds: 15 };
    for (const name of ['auth.purge-expired-sessions', 'webhooks.purge-deliveries'])
      await old.createQueue(name, { ...queueOptions });
    const queued = (await old.send('auth.purge-expired-sessions', {}))!;
    const delayed = (await old.send('webhooks.purge-deliveries', {}, { startAfter: 5 }))!;
    // Claimed by a process that then died: active, never completed.
    const held = (await old.send('webhooks.purge-deliveries', {}))!;
    const [claimed] = await old.fetch('webhooks.purge-deliveries');
    expect(claimed?.id).to.equal(held);
    await old.stop({ graceful: false, close: true });

    const check = new pg.Client({ connectionString: scratch.url });
    await check.connect();
    try {
      const version = async () =>
        (await check.query<{ version: number }>('select version from pgboss.version')).rows[0]!.version;
      const before = await version();

      server = await startServer(await freePort());
      expect(await version()).to.be.above(before);

      const ids = [queued, delayed, held];
      const jobs = await waitFor(
        'the jobs queued before the upgrade to complete',
        async () => {
          const { rows } = await check.query<{ id: string; state: string; retry_count: number }>(
            `select id, state, retry_count from pgboss.job where id = any($1::uuid[])`,
            [ids],
          );
          return rows.length === 3 && rows.every((r) => r.state === 'completed') ? rows : null;
        },
        { timeoutMs: 90_000, intervalMs: 250 },
      );
      const byId = new Map(jobs.map((j) => [j.id, j.retry_count]));
      expect(byId.get(queued)).to.equal(0);
      expect(byId.get(delayed)).to.equal(0);
      // The dead process's job ran again as a retry.
      expect(byId.get(held)).to.equal(1);

      // The queues now carry the heartbeat; jobs sent from now on take it.
      const queues = await check.query<{ name: string; heartbeat_seconds: number | null }>(
        `select name, heartbeat_seconds from pgboss.queue where name = any($1)`,
        [['auth.purge-expired-sessions', 'webhooks.purge-deliveries']],
      );
      expect(queues.rows.map((q) => q.heartbeat_seconds)).to.deep.equal([10, 10]);
    } finally {
      await check.end();
    }
  });
});
