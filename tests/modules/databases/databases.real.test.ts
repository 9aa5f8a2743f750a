// Test tier: process
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { Socket } from 'node:net';
import { expect } from 'chai';
import mysql from 'mysql2/promise';
import { usingPostgres } from '../../support/env.js';
import { createOrg, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { skipOrFail } from '../../support/redis.js';
import type { TestServer } from '../../support/server.js';
import { serviceContext } from '../../../server/kit/deps.js';
import { enforceStorage } from '../../../server/modules/databases/databases-lifecycle.service.js';
import { waitFor } from '../../support/wait.js';
import { dbName, eventsOf, storedDatabase } from './databases-helpers.js';
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
 * Real databases (docs/databases.md, "Databases", Real servers) on the servers of this machine: PostgreSQL at 127.0.0.1:5432
 * and MariaDB at 127.0.0.1:3306. Each suite skips, saying why, where its server does not answer (fails under
 * TEST_REQUIRE_SERVICES=1). Every database and role the tests create is dropped at the end.
 */

/** A server that never answers, with a password that must never show anywhere. */
const DOWN_SECRET = 'Sup3rSecretAdminPw';
const PG_DOWN = `postgres://postgres:${DOWN_SECRET}@127.0.0.1:9/postgres`;

async function pgRefused(url: string): Promise<string> {
  try {
    const c = await pgConnect(url);
    await c.end();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('the connection was accepted');
}

const stringOf = (v: unknown) => JSON.stringify(v);

describe(`Databases on a real PostgreSQL server (API on ${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(120_000);
  let server: TestServer;
  let owner: TestUser;
  let backupDir: string;
  const created: string[] = [];

  before(async function () {
    const down = await pgAnswers();
    if (down) skipOrFail(this, `This test needs PostgreSQL at 127.0.0.1:5432: ${down.message}`, down);
    backupDir = mkdtempSync(join(tmpdir(), 'db-backups-'));
    server = await realServer(`postgresql@us-east=${PG_ADMIN},postgresql@us-west=${PG_DOWN}`, backupDir);
    owner = await createOrg(server.deps, { plan: 'enterprise' });
  });

  after(async () => {
    await server?.close();
    for (const id of created) {
      const name = `cdb_${id.slice(3)}`;
      await pgAdmin(`drop database if exists "${name}" with (force)`).catch(() => {});
      await pgAdmin(`drop role if exists "${name}"`).catch(() => {});
    }
    if (backupDir && !process.env.KEEP_BACKUPS) rmSync(backupDir, { recursive: true, force: true });
  });

  async function create(body: Record<string, unknown> = {}) {
    const res = await http(server.baseUrl, 'POST', '/v1/databases', {
      token: owner.token,
      body: { name: dbName('real'), engine: 'postgresql', backup_enabled: false, ...body },
    });
    expect(res.status, res.text).to.equal(201);
    created.push(res.body.database.id);
    return res.body.database;
  }

  async function running(id: string) {
    return waitFor(
      'the database to be running',
      async () => {
        const res = await http(server.baseUrl, 'GET', `/v1/databases/${id}`, { token: owner.token });
        if (res.body.database?.status === 'failed') throw new Error(res.body.database.status_reason);
        return res.body.database?.status === 'running' ? res.body.database : undefined;
      },
      { timeoutMs: 60_000 },
    );
  }

  async function backup(id: string) {
    const res = await http(server.baseUrl, 'POST', `/v1/databases/${id}/backups`, {
      token: owner.token,
      body: {},
    });
    expect(res.status, res.text).to.equal(202);
    return waitFor(
      'the backup to complete',
      async () => {
        const list = await http(server.baseUrl, 'GET', `/v1/databases/${id}/backups`, { token: owner.token });
        const b = list.body.backups.find((x: { id: string }) => x.id === res.body.backup.id);
        if (b?.status === 'failed') throw new Error(b.failure_reason);
        return b?.status === 'completed' ? b : undefined;
      },
      { timeoutMs: 60_000 },
    );
  }

  it('creates a real database: a client using the returned string writes and reads rows; isolated; limited', async () => {
    const d = await create();
    expect(d.connection_info).to.include({ host: '127.0.0.1', port: 5432, simulated: false });
    expect(d.connection_info.password).to.match(/^[A-Za-z0-9]{32,}$/);
    const view = await running(d.id);
    expect(view.connection_string).to.contain('****');

    const client = await pgConnect(d.connection_string);
    await client.query('create table items (id int primary key, label text)');
    await client.query("insert into items values (1, 'one'), (2, 'two')");
    expect((await client.query('select label from items order by id')).rows).to.deep.equal([
      { label: 'one' },
      { label: 'two' },
    ]);
    const withSession = await waitFor(
      'a session in its metrics',
      async () => {
        const res = await http(server.baseUrl, 'GET', `/v1/databases/${d.id}`, { token: owner.token });
        return res.body.database.metrics.connections.active >= 1 ? res.body.database : undefined;
      },
      { timeoutMs: 10_000 },
    );
    expect(withSession.metrics.connections.max).to.equal(50);
    await client.end();

    const [role] = await pgAdmin<Record<string, unknown>>(
      `select rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolconnlimit from pg_roles where rolname = $1`,
      [d.connection_info.user],
    );
    expect(role).to.deep.equal({
      rolsuper: false,
      rolcreatedb: false,
      rolcreaterole: false,
      rolreplication: false,
      rolconnlimit: 50,
    });
    const [acl] = await pgAdmin<{ datacl: string }>(
      'select datacl::text from pg_database where datname = $1',
      [d.connection_info.database],
    );
    expect(acl!.datacl).to.not.match(/(^|[{,])=/); // no grant to PUBLIC

    // Another database's credentials cannot open this one, nor this one's the other.
    const other = await create();
    await running(other.id);
    const crossed = other.connection_string.replace(
      `/${other.connection_info.database}`,
      `/${d.connection_info.database}`,
    );
    expect(await pgRefused(crossed)).to.match(/permission denied|not permitted|authentication/i);

    // Resize: the role's connection limit follows the size.
    const put = await http(server.baseUrl, 'PUT', `/v1/databases/${d.id}`, {
      token: owner.token,
      body: { size: 'medium' },
    });
    expect(put.status, put.text).to.equal(200);
    const resized = await running(d.id);
    expect(resized.metrics.connections.max).to.equal(100);
    const [limit] = await pgAdmin<{ rolconnlimit: number }>(
      'select rolconnlimit from pg_roles where rolname = $1',
      [d.connection_info.user],
    );
    expect(limit!.rolconnlimit).to.equal(100);
  });

  it('resets the password at once: the old one is refused and its sessions end, the new one works', async () => {
    const d = await create();
    await running(d.id);
    const session = await pgConnect(d.connection_string);
    session.on('error', () => {});
    const res = await http(server.baseUrl, 'POST', `/v1/databases/${d.id}/reset-password`, {
      token: owner.token,
    });
    expect(res.status, res.text).to.equal(200);
    const ended = await session.query('select 1').then(
      () => false,
      () => true,
    );
    expect(ended, 'the session opened with the old password ended').to.equal(true);
    const enforced = await pgAdmin<{ n: number }>(
      "select count(*)::int as n from pg_hba_file_rules where '+cloud_databases' = any(user_name) and auth_method <> 'trust'",
    );
    if (enforced[0]!.n > 0) {
      expect(await pgRefused(d.connection_string)).to.match(/password authentication failed/);
    } else {
      console.warn(
        '      note: pg_hba.conf trusts 127.0.0.1 for every role here: the old password is not checked',
      );
    }
    const fresh = await pgConnect(res.body.database.connection_string);
    expect((await fresh.query('select current_user as u')).rows[0].u).to.equal(d.connection_info.user);
    await fresh.end();
  });

  it('backs up to the store (real size, checksum) and restores the dump into a new database', async () => {
    const d = await create();
    await running(d.id);
    const c = await pgConnect(d.connection_string);
    await c.query('create table notes (id serial primary key, body text)');
    await c.query("insert into notes (body) select 'note ' || g from generate_series(1, 500) g");
    await c.end();

    const b = await backup(d.id);
    const file = join(backupDir, `${b.id}.dump`);
    expect(statSync(file).size).to.equal(b.size_bytes);
    const sum = readFileSync(join(backupDir, `${b.id}.sha256`), 'utf8').split(' ')[0];
    expect(sum).to.equal(createHash('sha256').update(readFileSync(file)).digest('hex'));
    const completed = await eventsOf(server.deps, owner.organizationId, 'database.backup.completed');
    expect(completed.map((e) => (e.data.object as { id: string }).id)).to.include(b.id);

    const copy = await create({ backup_id: b.id });
    expect(copy.restored_from_backup_id).to.equal(b.id);
    await running(copy.id);
    const r = await pgConnect(copy.connection_string);
    const rows = await r.query('select count(*)::int as n, max(body) as last from notes');
    expect(rows.rows[0]).to.deep.equal({ n: 500, last: 'note 99' });
    // The restored tables belong to the new database's own role.
    const owners = await r.query("select tableowner from pg_tables where tablename = 'notes'");
    expect(owners.rows[0].tableowner).to.equal(copy.connection_info.user);
    await r.query("insert into notes (body) values ('writable')");
    await r.end();
  });

  it('refuses to restore a backup that does not match its checksum: failed at once with the reason, nothing left', async () => {
    const d = await create();
    await running(d.id);
    const c = await pgConnect(d.connection_string);
    await c.query("create table notes as select 'note ' || g as body from generate_series(1, 2000) g");
    await c.end();
    const b = await backup(d.id);
    // One byte changed in the middle of the dump: same size, another content.
    const file = join(backupDir, `${b.id}.dump`);
    const bytes = readFileSync(file);
    const middle = bytes.length >> 1;
    bytes[middle] = bytes[middle]! ^ 0xff;
    writeFileSync(file, bytes);

    const copy = await create({ backup_id: b.id });
    const failed = await waitFor(
      'the restore to fail',
      async () => {
        const res = await http(server.baseUrl, 'GET', `/v1/databases/${copy.id}`, { token: owner.token });
        return res.body.database?.status === 'failed' ? res.body.database : undefined;
      },
      { timeoutMs: 20_000 },
    );
    expect(failed.status_reason).to.match(/does not match its checksum/);
    const name = copy.connection_info.database;
    expect(await pgAdmin('select 1 from pg_database where datname = $1', [name])).to.have.length(0);
    expect(await pgAdmin('select 1 from pg_roles where rolname = $1', [name])).to.have.length(0);
  });

  it('turns a database over its storage read-only (database.updated), writable again once back under', async () => {
    const d = await create();
    await running(d.id);
    expect(
      await enforceStorage(serviceContext(server.deps), { limitBytes: (x) => (x.id === d.id ? 1 : 1e15) }),
    ).to.equal(1);
    const c = await pgConnect(d.connection_string);
    const refused = await c.query('create table t (x int)').then(
      () => null,
      (err: Error) => err.message,
    );
    expect(refused).to.match(/read-only transaction/);
    await c.end().catch(() => {});
    const view = await http(server.baseUrl, 'GET', `/v1/databases/${d.id}`, { token: owner.token });
    expect(view.body.database.read_only).to.equal(true);
    const updates = await eventsOf(server.deps, owner.organizationId, 'database.updated');
    expect(updates.some((e) => (e.data.object as { read_only?: boolean }).read_only === true)).to.equal(true);
    expect(await enforceStorage(serviceContext(server.deps), { limitBytes: () => 1e15 })).to.be.at.least(1);
    const again = await pgConnect(d.connection_string);
    await again.query('create table t (x int)');
    await again.end();
  });

  it('deletes: a final dump is taken, then the database and its role are dropped after the grace period', async () => {
    const d = await create();
    await running(d.id);
    const c = await pgConnect(d.connection_string);
    await c.query('create table kept (x int)');
    await c.query('insert into kept values (42)');
    await c.end();
    const del = await http(server.baseUrl, 'DELETE', `/v1/databases/${d.id}`, { token: owner.token });
    expect(del.status, del.text).to.equal(202);
    await waitFor(
      'the database to be gone',
      async () => {
        const res = await http(server.baseUrl, 'GET', `/v1/databases/${d.id}`, { token: owner.token });
        return res.status === 404 ? true : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const name = d.connection_info.database;
    expect(await pgAdmin('select 1 from pg_database where datname = $1', [name])).to.have.length(0);
    expect(await pgAdmin('select 1 from pg_roles where rolname = $1', [name])).to.have.length(0);
    expect(existsSync(join(backupDir, `${del.body.final_backup}.dump`))).to.equal(true);

    // The final backup restores into a new database.
    const copy = await create({ backup_id: del.body.final_backup });
    await running(copy.id);
    const r = await pgConnect(copy.connection_string);
    expect((await r.query('select x from kept')).rows).to.deep.equal([{ x: 42 }]);
    await r.end();
  });

  it('refuses an engine or region without a server (409 UNSUPPORTED_PLACEMENT), and hostile names', async () => {
    for (const body of [
      { engine: 'mongodb' },
      { engine: 'mysql' },
      { engine: 'postgresql', region: 'eu-west' },
    ]) {
      const res = await http(server.baseUrl, 'POST', '/v1/databases', {
        token: owner.token,
        body: { name: dbName('refused'), ...body },
      });
      expect(res.status, res.text).to.equal(409);
      expect(res.body.error.code).to.equal('UNSUPPORTED_PLACEMENT');
    }
    const before = await pgAdmin<{ n: number }>('select count(*)::int as n from pg_database');
    const hostile = await http(server.baseUrl, 'POST', '/v1/databases', {
      token: owner.token,
      body: { name: `x"; drop database postgres; --'`, engine: 'postgresql' },
    });
    expect(hostile.status).to.equal(400);
    const after = await pgAdmin<{ n: number }>('select count(*)::int as n from pg_database');
    expect(after[0]!.n).to.equal(before[0]!.n);
  });

  it('a server down: the create is retried, then failed with a reason that holds no credentials', async function () {
    this.timeout(90_000);
    const d = await create({ region: 'us-west' });
    const failed = await waitFor(
      'the database to fail',
      async () => {
        const res = await http(server.baseUrl, 'GET', `/v1/databases/${d.id}`, { token: owner.token });
        return res.body.database?.status === 'failed' ? res.body.database : undefined;
      },
      { timeoutMs: 80_000 },
    );
    expect(failed.status_reason).to.be.a('string').and.not.empty;
    expect(failed.status_reason).to.not.contain(DOWN_SECRET);
    const stored = await storedDatabase(server.deps, d.id);
    expect(stringOf(stored)).to.not.contain(DOWN_SECRET);
    const events = await eventsOf(server.deps, owner.organizationId);
    expect(stringOf(events.map((e) => e.data))).to.not.contain(DOWN_SECRET);
    expect(stringOf(events.map((e) => e.data))).to.not.contain(d.connection_info.password);
    // A failed database can be deleted.
    const del = await http(server.baseUrl, 'DELETE', `/v1/databases/${d.id}`, { token: owner.token });
    expect(del.status, del.text).to.equal(202);
    expect(server.deps.modules.databases.driver).to.exist;
  });
});

describe(`Databases on a real MariaDB server (API on ${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(120_000);
  let server: TestServer;
  let owner: TestUser;
  let backupDir: string;
  const created: string[] = [];
  let admin: mysql.Connection;

  before(async function () {
    const down = await mysqlAnswers();
    if (down)
      skipOrFail(
        this,
        `This test needs MariaDB at 127.0.0.1:3306 (root, no password): ${down.message}`,
        down,
      );
    admin = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
    backupDir = mkdtempSync(join(tmpdir(), 'db-backups-'));
    server = await realServer(`mysql@us-east=${MYSQL_ADMIN}`, backupDir);
    owner = await createOrg(server.deps, { plan: 'enterprise' });
  });

  after(async () => {
    await server?.close();
    for (const id of created) {
      const name = `cdb_${id.slice(3)}`;
      await admin?.query(`drop database if exists \`${name}\``).catch(() => {});
      await admin?.query(`drop user if exists '${name}'@'%'`).catch(() => {});
    }
    await admin?.end();
    if (backupDir && !process.env.KEEP_BACKUPS) rmSync(backupDir, { recursive: true, force: true });
  });

  async function create(body: Record<string, unknown> = {}) {
    const res = await http(server.baseUrl, 'POST', '/v1/databases', {
      token: owner.token,
      body: { name: dbName('maria'), engine: 'mysql', backup_enabled: false, ...body },
    });
    expect(res.status, res.text).to.equal(201);
    created.push(res.body.database.id);
    return res.body.database;
  }

  async function running(id: string) {
    return waitFor(
      'the database to be running',
      async () => {
        const res = await http(server.baseUrl, 'GET', `/v1/databases/${id}`, { token: owner.token });
        if (res.body.database?.status === 'failed') throw new Error(res.body.database.status_reason);
        return res.body.database?.status === 'running' ? res.body.database : undefined;
      },
      { timeoutMs: 60_000 },
    );
  }

  const connect = (url: string) => mysql.createConnection({ uri: url, connectTimeout: 5000 });

  async function refused(url: string): Promise<string> {
    try {
      const c = await connect(url);
      await c.end();
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error('the connection was accepted');
  }

  it('creates, writes, backs up, restores, resets the password, resizes, isolates and deletes', async () => {
    const d = await create();
    expect(d.connection_info).to.include({ host: '127.0.0.1', port: 3306, simulated: false });
    await running(d.id);
    const c = await connect(d.connection_string);
    await c.query('create table items (id int primary key, label varchar(20))');
    await c.query("insert into items values (1, 'one'), (2, 'two')");
    const [rows] = await c.query('select label from items order by id');
    expect(rows).to.deep.equal([{ label: 'one' }, { label: 'two' }]);
    await c.end();

    const [limits] = await admin.query<mysql.RowDataPacket[]>(
      "select max_user_connections as m from mysql.user where User = ? and Host = '%'",
      [d.connection_info.user],
    );
    expect(Number(limits[0]!.m)).to.equal(50);

    // Backup and restore.
    const post = await http(server.baseUrl, 'POST', `/v1/databases/${d.id}/backups`, {
      token: owner.token,
      body: {},
    });
    expect(post.status, post.text).to.equal(202);
    const b = await waitFor(
      'the backup to complete',
      async () => {
        const list = await http(server.baseUrl, 'GET', `/v1/databases/${d.id}/backups`, {
          token: owner.token,
        });
        const x = list.body.backups.find((y: { id: string }) => y.id === post.body.backup.id);
        if (x?.status === 'failed') throw new Error(x.failure_reason);
        return x?.status === 'completed' ? x : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(statSync(join(backupDir, `${b.id}.dump`)).size).to.equal(b.size_bytes);
    expect(readFileSync(join(backupDir, `${b.id}.dump`), 'utf8')).to.contain('CREATE TABLE `items`');
    const copy = await create({ backup_id: b.id });
    await running(copy.id);
    const r = await connect(copy.connection_string);
    const [copied] = await r.query('select count(*) as n from items');
    expect(copied).to.deep.equal([{ n: 2 }]);
    await r.end();

    // Isolation: the copy's user cannot open the first database.
    expect(
      await refused(
        copy.connection_string.replace(`/${copy.connection_info.database}`, `/${d.connection_info.database}`),
      ),
    ).to.match(/denied/i);

    // Reset password: the old one is refused, the new one works.
    const reset = await http(server.baseUrl, 'POST', `/v1/databases/${d.id}/reset-password`, {
      token: owner.token,
    });
    expect(reset.status, reset.text).to.equal(200);
    expect(await refused(d.connection_string)).to.match(/denied/i);
    const fresh = await connect(reset.body.database.connection_string);
    await fresh.end();

    // Resize.
    const put = await http(server.baseUrl, 'PUT', `/v1/databases/${d.id}`, {
      token: owner.token,
      body: { size: 'large' },
    });
    expect(put.status, put.text).to.equal(200);
    await running(d.id);
    const [after] = await admin.query<mysql.RowDataPacket[]>(
      "select max_user_connections as m from mysql.user where User = ? and Host = '%'",
      [d.connection_info.user],
    );
    expect(Number(after[0]!.m)).to.equal(200);

    // Delete: final dump, then database and user dropped.
    const del = await http(server.baseUrl, 'DELETE', `/v1/databases/${d.id}`, { token: owner.token });
    expect(del.status, del.text).to.equal(202);
    await waitFor(
      'the database to be gone',
      async () => {
        const res = await http(server.baseUrl, 'GET', `/v1/databases/${d.id}`, { token: owner.token });
        return res.status === 404 ? true : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const [dbs] = await admin.query<mysql.RowDataPacket[]>('show databases like ?', [
      d.connection_info.database,
    ]);
    expect(dbs).to.have.length(0);
    const [users] = await admin.query<mysql.RowDataPacket[]>('select 1 from mysql.user where User = ?', [
      d.connection_info.user,
    ]);
    expect(users).to.have.length(0);
    expect(existsSync(join(backupDir, `${del.body.final_backup}.dump`))).to.equal(true);
  });
});

describe(`Databases on real servers: the admin connections close with the server (API on ${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(60_000);

  /** This process's open sockets to `port`. */
  const socketsTo = (port: number) =>
    (process as unknown as { _getActiveHandles(): unknown[] })
      ._getActiveHandles()
      .filter((h): h is Socket => h instanceof Socket && h.remotePort === port && !h.destroyed);

  it('stopServices ends the drivers’ pools: no socket to MariaDB is left, the driver was closed', async function () {
    const [pgDown, mysqlDown] = await Promise.all([pgAnswers(), mysqlAnswers()]);
    if (pgDown || mysqlDown) {
      skipOrFail(
        this,
        'This test needs PostgreSQL at 127.0.0.1:5432 and MariaDB at 127.0.0.1:3306',
        pgDown ?? mysqlDown!,
      );
    }
    const before = new Set(socketsTo(3306));
    const backupDir = mkdtempSync(join(tmpdir(), 'db-backups-'));
    const server = await realServer(`postgresql@us-east=${PG_ADMIN},mysql@us-east=${MYSQL_ADMIN}`, backupDir);
    try {
      const driver = server.deps.modules.databases.driver;
      let closed = 0;
      const close = driver.close.bind(driver);
      driver.close = async () => {
        closed++;
        await close();
      };
      // Each server's pool opens a connection (the storage read of a database that does not exist).
      const instance = (engine: 'postgresql' | 'mysql', port: number) => ({
        id: 'db_closetest',
        name: 'closetest',
        engine,
        version: '1',
        size: 'small' as const,
        region: 'us-east' as const,
        host: '127.0.0.1',
        port,
        dbName: 'cdb_closetest',
        dbUser: 'cdb_closetest',
        server: `${engine}@us-east#0`,
        multiAz: false,
      });
      const keys = driver.placements({ id: 'db_closetest', name: 'x', engine: 'mysql', region: 'us-east' });
      const pgKeys = driver.placements({
        id: 'db_closetest',
        name: 'x',
        engine: 'postgresql',
        region: 'us-east',
      });
      expect(await driver.storageBytes({ ...instance('mysql', 3306), server: keys[0]!.server })).to.equal(
        null,
      );
      expect(
        await driver.storageBytes({ ...instance('postgresql', 5432), server: pgKeys[0]!.server }),
      ).to.equal(null);
      expect(socketsTo(3306).filter((s) => !before.has(s))).to.not.be.empty;

      await server.close();
      expect(closed).to.equal(1);
      // A socket ends on the next turns of the event loop once its pool has ended.
      await waitFor(
        "the pool's sockets to close",
        async () => (socketsTo(3306).some((s) => !before.has(s)) ? undefined : true),
        { timeoutMs: 5_000 },
      );
    } finally {
      await server.close();
      rmSync(backupDir, { recursive: true, force: true });
    }
  });
});
