// Test tier: process
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import mysql from 'mysql2/promise';
import type pg from 'pg';
import { testConfig, usingPostgres } from '../../support/env.js';
import { createOrg, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { freePort } from '../../support/ports.js';
import { skipOrFail } from '../../support/redis.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { waitFor, waitForServerStart } from '../../support/wait.js';
import { dbName, sleep } from './databases-helpers.js';
import {
  MYSQL_ADMIN,
  PG_ADMIN,
  mysqlAnswers,
  pgAdmin,
  pgAnswers,
  pgConnect,
  realServer,
} from './real-servers.js';

/**
 * What a hostile tenant, or a crash, does to the tools that dump and restore real databases (docs/databases.md,
 * "Limits of the tools"): a dump or restore held up by one tenant never holds another's backup or create, every run
 * has a wall clock, tools die with the API, and nothing of a dump is left behind. On the real servers of this
 * machine: PostgreSQL at 127.0.0.1:5432 and MariaDB at 127.0.0.1:3306.
 */

const ROOT = resolve(import.meta.dirname, '../../..');

/** An API server on the real servers, whose deletions wait 2 s. */
const faultServer = (hosts: string, backupDir: string, extra: Record<string, string> = {}) =>
  realServer(hosts, backupDir, { DATABASE_DELETION_GRACE: '2s', ...extra });

/** The API of one test server, as one organization's owner. */
function api(server: TestServer, owner: TestUser, engine: 'postgresql' | 'mysql', created: string[]) {
  const call = (method: string, path: string, body?: unknown) =>
    http(server.baseUrl, method, path, { token: owner.token, ...(body ? { body } : {}) });
  const get = async (id: string) => (await call('GET', `/v1/databases/${id}`)).body.database;
  return {
    call,
    get,
    async create(body: Record<string, unknown> = {}) {
      const res = await call('POST', '/v1/databases', {
        name: dbName('fault'),
        engine,
        backup_enabled: false,
        ...body,
      });
      expect(res.status, res.text).to.equal(201);
      created.push(res.body.database.id);
      return res.body.database as {
        id: string;
        connection_string: string;
        connection_info: Record<string, string>;
      };
    },
    async running(id: string, timeoutMs = 60_000) {
      return waitFor(
        `database ${id} to be running`,
        async () => {
          const d = await get(id);
          if (d?.status === 'failed') throw new Error(`failed: ${d.status_reason}`);
          return d?.status === 'running' ? d : undefined;
        },
        { timeoutMs },
      );
    },
    async startBackup(id: string): Promise<string> {
      const res = await call('POST', `/v1/databases/${id}/backups`, {});
      expect(res.status, res.text).to.equal(202);
      return res.body.backup.id;
    },
    async backupOf(id: string, backupId: string) {
      const list = await call('GET', `/v1/databases/${id}/backups?limit=100`);
      return (list.body.backups ?? []).find((b: { id: string }) => b.id === backupId);
    },
  };
}

async function dropPg(ids: string[]) {
  for (const id of ids) {
    const name = `cdb_${id.slice(3)}`;
    await pgAdmin(`drop database if exists "${name}" with (force)`).catch(() => {});
    await pgAdmin(`drop role if exists "${name}"`).catch(() => {});
  }
}

async function dropMysql(ids: string[]) {
  const c = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
  try {
    for (const id of ids) {
      const name = `cdb_${id.slice(3)}`;
      await c.query(`drop database if exists \`${name}\``).catch(() => {});
      await c.query(`drop user if exists '${name}'@'%'`).catch(() => {});
    }
  } finally {
    await c.end();
  }
}

describe(`Databases: faults of the dump and restore tools, PostgreSQL (API on ${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(180_000);
  let server: TestServer | undefined;
  let owner: TestUser;
  let backupDir: string;
  const created: string[] = [];
  const sessions: pg.Client[] = [];

  before(async function () {
    const down = await pgAnswers();
    if (down) skipOrFail(this, `This test needs PostgreSQL at 127.0.0.1:5432: ${down.message}`, down);
    backupDir = mkdtempSync(join(tmpdir(), 'db-faults-'));
  });

  afterEach(async () => {
    for (const s of sessions.splice(0)) await s.end().catch(() => {});
    await server?.close();
    server = undefined;
  });

  after(async () => {
    await dropPg(created);
    if (backupDir) rmSync(backupDir, { recursive: true, force: true });
  });

  async function start(extra: Record<string, string>) {
    server = await faultServer(`postgresql@us-east=${PG_ADMIN}`, backupDir, extra);
    owner = await createOrg(server.deps, { plan: 'enterprise' });
    return api(server, owner, 'postgresql', created);
  }

  it("a dump waiting on a tenant's lock holds neither another tenant's backup; it fails at DATABASE_TOOL_TIMEOUT, named", async () => {
    const a = await start({ DATABASE_TOOL_TIMEOUT: '8s', DATABASE_DUMP_LOCK_TIMEOUT: '1h' });
    const [dA, dB] = [await a.create(), await a.create()];
    await a.running(dA.id);
    await a.running(dB.id);
    const tenant = await pgConnect(dA.connection_string);
    sessions.push(tenant);
    await tenant.query('create table t (i int)');
    await tenant.query('begin');
    await tenant.query('lock table t in access exclusive mode');

    const stuck = await a.startBackup(dA.id);
    // pg_dump of A is waiting on the lock.
    await waitFor(
      'pg_dump of A to wait on the lock',
      async () => {
        const rows = await pgAdmin<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity where datname = $1 and wait_event_type = 'Lock'`,
          [dA.connection_info.database],
        );
        return rows[0]!.n > 0 ? true : undefined;
      },
      { timeoutMs: 20_000 },
    );
    const t0 = Date.now();
    const other = await a.startBackup(dB.id);
    const done = await waitFor(
      'the backup of B to complete',
      async () => {
        const b = await a.backupOf(dB.id, other);
        if (b?.status === 'failed') throw new Error(b.failure_reason);
        return b?.status === 'completed' ? b : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const waited = Date.now() - t0;
    console.log(
      `      B's backup completed ${waited} ms after it was asked, while A's dump waited on a lock`,
    );
    expect(done.status).to.equal('completed');
    expect((await a.backupOf(dA.id, stuck)).status, "A's dump still waiting").to.equal('pending');
    expect(waited).to.be.below(7000);

    // A's dump is stopped at its wall clock: failed, with the limit named.
    const failed = await waitFor(
      'the stuck backup to fail',
      async () => {
        const b = await a.backupOf(dA.id, stuck);
        return b?.status === 'failed' ? b : undefined;
      },
      { timeoutMs: 40_000 },
    );
    expect(failed.failure_reason).to.match(/DATABASE_TOOL_TIMEOUT/);
    expect(failed.failure_reason).to.match(/8s/);
    await tenant.query('rollback');
  });

  it('pg_dump gives up a lock held longer than DATABASE_DUMP_LOCK_TIMEOUT', async () => {
    const a = await start({ DATABASE_TOOL_TIMEOUT: '1h', DATABASE_DUMP_LOCK_TIMEOUT: '500ms' });
    const d = await a.create();
    await a.running(d.id);
    const tenant = await pgConnect(d.connection_string);
    sessions.push(tenant);
    await tenant.query('create table t (i int)');
    await tenant.query('begin');
    await tenant.query('lock table t in access exclusive mode');
    const started = Date.now();
    await a.startBackup(d.id);
    // The first attempt's failure is logged by the job; the database's own sessions show no dump left waiting.
    await sleep(3000);
    const waiting = await pgAdmin<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity where datname = $1 and wait_event_type = 'Lock'
         and backend_start < now() - interval '2 seconds'`,
      [d.connection_info.database],
    );
    expect(waiting[0]!.n, 'a dump still waiting on the lock').to.equal(0);
    expect(Date.now() - started).to.be.below(30_000);
    await tenant.query('rollback');
  });

  it("a restore slowed by the tenant's own CHECK does not hold another tenant's create; it stops at the limit", async () => {
    const a = await start({ DATABASE_TOOL_TIMEOUT: '8s', DATABASE_DUMP_LOCK_TIMEOUT: '1m' });
    const source = await a.create();
    await a.running(source.id);
    const tenant = await pgConnect(source.connection_string);
    sessions.push(tenant);
    // Sleeps in any database but this one: in the restore of its dump.
    await tenant.query(
      `create function slow() returns boolean language plpgsql as $$ begin
         if current_database() <> '${source.connection_info.database}' then perform pg_sleep(30); end if;
         return true; end $$`,
    );
    await tenant.query('create table s (i int check (slow()))');
    await tenant.query('insert into s values (1)');
    const backupId = await a.startBackup(source.id);
    await waitFor(
      'the backup to complete',
      async () => {
        const b = await a.backupOf(source.id, backupId);
        if (b?.status === 'failed') throw new Error(b.failure_reason);
        return b?.status === 'completed' ? b : undefined;
      },
      { timeoutMs: 60_000 },
    );

    const restored = await a.create({ backup_id: backupId });
    // Its restore is running (the CHECK sleeping on the restored row).
    await waitFor(
      'the restore to be running',
      async () => {
        const rows = await pgAdmin<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity where datname = $1 and wait_event = 'PgSleep'`,
          [`cdb_${restored.id.slice(3)}`],
        );
        return rows[0]!.n > 0 ? true : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const t0 = Date.now();
    const other = await a.create();
    await a.running(other.id, 60_000);
    const waited = Date.now() - t0;
    console.log(`      another create was running ${waited} ms after it was asked, during a slow restore`);
    expect(waited).to.be.below(7000);
    expect((await a.get(restored.id)).status).to.equal('creating');
    const failed = await waitFor(
      'the restore to fail',
      async () => {
        const d = await a.get(restored.id);
        return d?.status === 'failed' ? d : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(failed.status_reason).to.match(/DATABASE_TOOL_TIMEOUT/);
  });
});

describe(`Databases: faults of the dump tools, MariaDB (API on ${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(180_000);
  let server: TestServer | undefined;
  let owner: TestUser;
  let backupDir: string;
  const created: string[] = [];

  before(async function () {
    const down = await mysqlAnswers();
    if (down) skipOrFail(this, `This test needs MariaDB at 127.0.0.1:3306: ${down.message}`, down);
    backupDir = mkdtempSync(join(tmpdir(), 'db-faults-my-'));
  });

  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  after(async () => {
    await dropMysql(created);
    if (backupDir) rmSync(backupDir, { recursive: true, force: true });
  });

  async function start(extra: Record<string, string>) {
    server = await faultServer(`mysql@us-east=${MYSQL_ADMIN}`, backupDir, extra);
    owner = await createOrg(server.deps, { plan: 'enterprise' });
    return api(server, owner, 'mysql', created);
  }

  async function tenantOf(d: { connection_info: Record<string, string> }) {
    const info = d.connection_info;
    return mysql.createConnection({
      host: info.host,
      port: Number(info.port),
      user: info.user,
      password: info.password,
      database: info.database,
    });
  }

  it("a dump waiting on a tenant's table lock holds no other backup, and fails at DATABASE_TOOL_TIMEOUT", async () => {
    const a = await start({ DATABASE_TOOL_TIMEOUT: '8s' });
    const [dA, dB] = [await a.create(), await a.create()];
    await a.running(dA.id);
    await a.running(dB.id);
    const tenant = await tenantOf(dA);
    try {
      await tenant.query('create table t (i int)');
      await tenant.query('insert into t values (1)');
      await tenant.query('lock tables t write');
      const stuck = await a.startBackup(dA.id);
      await sleep(1500);
      const t0 = Date.now();
      const other = await a.startBackup(dB.id);
      await waitFor(
        'the backup of B to complete',
        async () => {
          const b = await a.backupOf(dB.id, other);
          if (b?.status === 'failed') throw new Error(b.failure_reason);
          return b?.status === 'completed' ? b : undefined;
        },
        { timeoutMs: 60_000 },
      );
      const waited = Date.now() - t0;
      console.log(
        `      B's backup completed ${waited} ms after it was asked, while A's dump waited on a lock`,
      );
      expect(waited).to.be.below(6000);
      expect((await a.backupOf(dA.id, stuck)).status).to.equal('pending');
      const failed = await waitFor(
        'the stuck backup to fail',
        async () => {
          const b = await a.backupOf(dA.id, stuck);
          return b?.status === 'failed' ? b : undefined;
        },
        { timeoutMs: 40_000 },
      );
      expect(failed.failure_reason).to.match(/DATABASE_TOOL_TIMEOUT/);
    } finally {
      await tenant.end().catch(() => {});
    }
  });
});

describe(`Databases: a deletion whose final dump fails, MariaDB (API on ${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(240_000);
  let server: TestServer | undefined;
  let backupDir: string;
  const created: string[] = [];

  before(async function () {
    const down = await mysqlAnswers();
    if (down) skipOrFail(this, `This test needs MariaDB at 127.0.0.1:3306: ${down.message}`, down);
    backupDir = mkdtempSync(join(tmpdir(), 'db-faults-del-'));
  });

  after(async () => {
    await server?.close();
    await dropMysql(created);
    if (backupDir) rmSync(backupDir, { recursive: true, force: true });
  });

  it('a broken view never keeps a deleted database: its login closes at the grace end, it is dropped, final failed', async () => {
    server = await faultServer(`mysql@us-east=${MYSQL_ADMIN}`, backupDir, { DATABASE_DELETION_GRACE: '2s' });
    // The starter plan holds 2 databases.
    const owner = await createOrg(server.deps, { plan: 'starter' });
    const a = api(server, owner, 'mysql', created);
    const [d1, d2] = [await a.create(), await a.create()];
    await a.running(d1.id);
    await a.running(d2.id);
    const info = d1.connection_info;
    const connect = () =>
      mysql.createConnection({
        host: info.host,
        port: Number(info.port),
        user: info.user,
        password: info.password,
        database: info.database,
        connectTimeout: 5000,
      });
    const tenant = await connect();
    await tenant.query('create table base (i int)');
    await tenant.query('create view v as select i from base');
    await tenant.query('drop table base');
    await tenant.end();

    const del = await a.call('DELETE', `/v1/databases/${d1.id}`);
    expect(del.status, del.text).to.equal(202);
    const finalId = del.body.final_backup as string;
    // Not counted while it waits: a third may be created.
    const d3 = await a.create();
    await a.running(d3.id);

    // At the grace's end (2 s) its login is closed, though its final dump keeps failing.
    await waitFor(
      'the login to be closed',
      async () => {
        try {
          const c = await connect();
          await c.end();
          return undefined;
        } catch (err) {
          return (err as Error).message;
        }
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );

    // The database goes, after the job's bounded tries: dropped on the server, its final backup failed with why.
    const admin = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
    try {
      await waitFor(
        'the database to be dropped',
        async () => {
          const [rows] = await admin.query(
            'select 1 from information_schema.SCHEMATA where SCHEMA_NAME = ?',
            [info.database],
          );
          return (rows as unknown[]).length === 0 ? true : undefined;
        },
        { timeoutMs: 180_000, intervalMs: 500 },
      );
      const [users] = await admin.query("select 1 from mysql.user where User = ? and Host = '%'", [
        info.user,
      ]);
      expect(users, 'its user').to.have.length(0);
    } finally {
      await admin.end();
    }
    const gone = await a.call('GET', `/v1/databases/${d1.id}`);
    expect(gone.status).to.equal(404);
    const list = await a.call('GET', '/v1/databases');
    expect(list.body.total).to.equal(2);
    const stored = await server.deps.db.orm.em
      .fork()
      .getConnection()
      .execute<{ status: string; failure_reason: string | null }[]>(
        'select status, failure_reason from database_backups where id = ?',
        [finalId],
      );
    expect(stored[0]?.status).to.equal('failed');
    expect(stored[0]?.failure_reason).to.match(/mariadb-dump exited with 2/);
  });
});

describe(`Databases: backups against the plan (API on ${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(120_000);
  let server: TestServer;
  let scratch: ScratchDatabase | undefined;

  before(async () => {
    scratch = await ownPostgresDatabase('db_faults_plan');
    server = await startTestServer({
      config: testConfig({
        PROVISIONING_DELAY_MS: '50',
        DATABASE_URL: scratch?.url ?? process.env.DATABASE_URL,
      }),
    });
  });
  after(async () => {
    await server?.close();
    await scratch?.drop();
  });

  it('manual backups in a row stop at the plan: 402 PLAN_LIMIT_EXCEEDED naming the count, then the bytes', async () => {
    const owner = await createOrg(server.deps, { plan: 'starter' });
    const a = api(server, owner, 'postgresql', []);
    const d = await a.create();
    await a.running(d.id, 15_000);
    const answers: number[] = [];
    let refused: { status: number; body: { error?: { code?: string; details?: unknown[] } } } | undefined;
    for (let i = 0; i < 15; i++) {
      const res = await a.call('POST', `/v1/databases/${d.id}/backups`, {});
      answers.push(res.status);
      if (res.status !== 202) {
        refused = res;
        break;
      }
    }
    expect(answers.filter((s) => s === 202)).to.have.length(10);
    expect(refused?.status).to.equal(402);
    expect(refused?.body.error?.code).to.equal('PLAN_LIMIT_EXCEEDED');
    expect(refused?.body.error?.details).to.deep.equal([
      { resource: 'manual_backups', limit: 10, current: 10 },
    ]);

    // Deleting backups is not possible through the API: another organization whose stored backups already hold its
    // plan's bytes is refused on bytes.
    const other = await createOrg(server.deps, { plan: 'starter' });
    const b = api(server, other, 'postgresql', []);
    const d2 = await b.create();
    await b.running(d2.id, 15_000);
    const first = await b.startBackup(d2.id);
    await waitFor('the first backup to complete', async () =>
      (await b.backupOf(d2.id, first))?.status === 'completed' ? true : undefined,
    );
    await server.deps.db.orm.em
      .fork()
      .getConnection()
      .execute('update database_backups set size_bytes = ? where id = ?', [100e9, first]);
    const res = await b.call('POST', `/v1/databases/${d2.id}/backups`, {});
    expect(res.status, res.text).to.equal(402);
    expect(res.body.error.details).to.deep.equal([
      { resource: 'backup_storage_bytes', limit: 100e9, current: 100e9 },
    ]);
  });
});

/**
 * The API killed (SIGKILL) during a dump: its pg_dump dies with it, and the next start removes the half-written dump.
 * The API runs as a process of its own (as in production), on PGlite or on a PostgreSQL database of its own.
 */
describe(`Databases: the API killed during a dump (API on ${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(180_000);
  let dir: string;
  let scratch: ScratchDatabase | undefined;
  let child: ChildProcess | undefined;
  let tenant: pg.Client | undefined;
  const created: string[] = [];
  const owner = { email: 'faults-kill@example.test', password: randomBytes(12).toString('base64url') };

  before(async function () {
    const down = await pgAnswers();
    if (down) skipOrFail(this, `This test needs PostgreSQL at 127.0.0.1:5432: ${down.message}`, down);
    dir = mkdtempSync(join(tmpdir(), 'db-faults-kill-'));
    if (usingPostgres) scratch = await ownPostgresDatabase('db_faults_kill');
  });

  after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await tenant?.end().catch(() => {});
    await dropPg(created);
    await scratch?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const env = () => ({
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    NODE_ENV: 'development',
    HOST: '127.0.0.1',
    DATA_DIR: join(dir, 'data'),
    BACKUP_DIR: join(dir, 'backups'),
    ...(scratch ? { DATABASE_URL: scratch.url } : {}),
    JWT_SECRET: 'faults-kill-jwt-secret-faults-kill-jwt-secret',
    BCRYPT_COST: '4',
    OWNER_EMAIL: owner.email,
    OWNER_PASSWORD: owner.password,
    ORGANIZATION_NAME: 'Faults Kill Co',
    PROVISIONING_DELAY_MS: '100',
    DATABASE_HOSTS: `postgresql@us-east=${PG_ADMIN}`,
    // This machine's server is shared by the whole run (as in tests/support/env.ts).
    DATABASE_SERVER_MAX_CONNECTIONS: '1000000',
    // The dump waits on the test's lock for as long as the test needs.
    DATABASE_TOOL_TIMEOUT: '1h',
    DATABASE_DUMP_LOCK_TIMEOUT: '1h',
    LOG_LEVEL: 'warn',
  });

  async function startChild(): Promise<{ baseUrl: string; proc: ChildProcess }> {
    const port = await freePort();
    const proc = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
      cwd: ROOT,
      env: { ...env(), PORT: String(port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const baseUrl = `http://127.0.0.1:${port}`;
    await waitForServerStart(baseUrl, proc, () => stderr);
    return { baseUrl, proc };
  }

  /** The pids of the processes running `name` whose command line holds `marker`. */
  function processes(name: string, marker: string): number[] {
    const found: number[] = [];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const cmd = readFileSync(`/proc/${entry}/cmdline`, 'latin1').split('\0');
        if (cmd.some((c) => c.endsWith(name))) {
          const environ = readFileSync(`/proc/${entry}/environ`, 'latin1');
          if (environ.includes(marker)) found.push(Number(entry));
        }
      } catch {
        // gone
      }
    }
    return found;
  }

  it('no pg_dump of it survives a SIGKILL of the API, and the next start removes its .partial', async () => {
    const first = await startChild();
    child = first.proc;
    const login = await http(first.baseUrl, 'POST', '/v1/auth/login', { body: owner });
    expect(login.status, login.text).to.equal(200);
    const token = login.body.token as string;
    const res = await http(first.baseUrl, 'POST', '/v1/databases', {
      token,
      body: { name: 'killed-dump', engine: 'postgresql', backup_enabled: false },
    });
    expect(res.status, res.text).to.equal(201);
    const d = res.body.database;
    created.push(d.id);
    await waitFor(
      'the database to be running',
      async () => {
        const got = await http(first.baseUrl, 'GET', `/v1/databases/${d.id}`, { token });
        return got.body.database?.status === 'running' ? true : undefined;
      },
      { timeoutMs: 60_000 },
    );
    tenant = await pgConnect(d.connection_string);
    await tenant.query('create table t (i int)');
    await tenant.query('insert into t select generate_series(1, 1000)');
    await tenant.query('begin');
    await tenant.query('lock table t in access exclusive mode');
    const b = await http(first.baseUrl, 'POST', `/v1/databases/${d.id}/backups`, { token, body: {} });
    expect(b.status, b.text).to.equal(202);

    // The pg_dump of that database, started by the API (its PGDATABASE names the database).
    const marker = `PGDATABASE=${d.connection_info.database}`;
    const dumps = await waitFor(
      'pg_dump to run',
      async () => {
        const pids = processes('pg_dump', marker);
        return pids.length ? pids : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const partials = () => readdirSync(join(dir, 'backups')).filter((f) => f.endsWith('.partial'));
    expect(partials(), 'the dump being written').to.have.length(1);

    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    const killedAt = Date.now();
    const survivors = await waitFor(
      'the pg_dump processes to end',
      async () => {
        const alive = dumps.filter((pid) => existsSync(`/proc/${pid}`) && !zombie(pid));
        return alive.length === 0 ? alive : Date.now() - killedAt > 5000 ? alive : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    expect(survivors, 'pg_dump processes still running 5 s after the API died').to.deep.equal([]);
    await tenant.query('rollback');

    // The next start: the half-written dump is gone.
    const second = await startChild();
    child = second.proc;
    expect(partials(), 'a .partial left by the killed API').to.deep.equal([]);
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
  });
});

function zombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}
