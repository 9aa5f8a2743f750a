// Test tier: process
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
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
import { dbName } from './databases-helpers.js';
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
 * A tenant of a real database server is hostile (docs/security.md, "Tenants of the database servers"): what it
 * stores in its database, what it runs in its sessions and what the platform's tools do with its dumps never reach
 * the admin's rights, another tenant's data or the server's capacity. Runs on the servers of this machine
 * (PostgreSQL at 127.0.0.1:5432, MariaDB at 127.0.0.1:3306); every database and role made is dropped at the end.
 */

/** The error message of `run`, or null when it succeeded. */
async function refusal(run: () => Promise<unknown>): Promise<string | null> {
  try {
    await run();
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** `url` opening database `database` instead (the same login). */
function otherDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.href;
}

/** Why one of the two servers does not answer; null when both do. */
async function servicesDown(): Promise<Error | null> {
  return (await pgAnswers()) ?? (await mysqlAnswers());
}

/** An API server on both real servers, whose deletions wait 1 s. */
const attackServer = (backupDir: string, extra: Record<string, string | undefined> = {}) =>
  realServer(`postgresql@us-east=${PG_ADMIN},mysql@us-east=${MYSQL_ADMIN}`, backupDir, {
    DATABASE_DELETION_GRACE: '1s',
    ...extra,
  });

interface Db {
  id: string;
  connection_string: string;
  connection_info: { user: string; database: string; password: string };
}

/** The REST calls of one owner on one API server. */
function apiOf(server: TestServer, owner: TestUser, created: string[]) {
  const call = (method: string, path: string, body?: unknown) =>
    http(server.baseUrl, method, path, { token: owner.token, ...(body ? { body } : {}) });
  return {
    async create(engine: 'postgresql' | 'mysql', body: Record<string, unknown> = {}): Promise<Db> {
      const res = await call('POST', '/v1/databases', {
        name: dbName('attack'),
        engine,
        backup_enabled: false,
        ...body,
      });
      expect(res.status, res.text).to.equal(201);
      created.push(res.body.database.id);
      return res.body.database;
    },
    /** The database once `running` or `failed`. */
    async settled(id: string): Promise<{ status: string; status_reason: string | null }> {
      return waitFor(
        'the database to be running or failed',
        async () => {
          const res = await call('GET', `/v1/databases/${id}`);
          const s = res.body.database?.status;
          return s === 'running' || s === 'failed' ? res.body.database : undefined;
        },
        { timeoutMs: 60_000 },
      );
    },
    async running(id: string) {
      const d = await this.settled(id);
      if (d.status !== 'running') throw new Error(`failed: ${d.status_reason}`);
      return d;
    },
    async backup(id: string): Promise<{ id: string }> {
      const res = await call('POST', `/v1/databases/${id}/backups`, {});
      expect(res.status, res.text).to.equal(202);
      return waitFor(
        'the backup to complete',
        async () => {
          const list = await call('GET', `/v1/databases/${id}/backups`);
          const b = list.body.backups.find((x: { id: string }) => x.id === res.body.backup.id);
          if (b?.status === 'failed') throw new Error(b.failure_reason);
          return b?.status === 'completed' ? b : undefined;
        },
        { timeoutMs: 60_000 },
      );
    },
    call,
  };
}

describe(`Tenants of real database servers are hostile (API on ${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(180_000);
  let server: TestServer;
  let owner: TestUser;
  let backupDir: string;
  let api: ReturnType<typeof apiOf>;
  let admin: mysql.Connection;
  const created: string[] = [];

  before(async function () {
    const down = await servicesDown();
    if (down)
      skipOrFail(
        this,
        `This test needs PostgreSQL at 127.0.0.1:5432 and MariaDB at 127.0.0.1:3306: ${down.message}`,
        down,
      );
    admin = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
    // PostgreSQL's defaults, which an API that prepared this server before changed: this one must close them again.
    await pgAdmin('grant connect, temporary on database postgres, template1 to public');
    backupDir = mkdtempSync(join(tmpdir(), 'db-attacks-'));
    server = await attackServer(backupDir);
    owner = await createOrg(server.deps, { plan: 'enterprise' });
    api = apiOf(server, owner, created);
  });

  after(async () => {
    await server?.close();
    for (const id of created) {
      const name = `cdb_${id.slice(3)}`;
      await pgAdmin(`alter database "${name}" is_template false`).catch(() => {});
      await pgAdmin(`drop database if exists "${name}" with (force)`).catch(() => {});
      await pgAdmin(`drop owned by "${name}"`).catch(() => {});
      await pgAdmin(`drop role if exists "${name}"`).catch(() => {});
      await admin?.query(`drop database if exists \`${name}\``).catch(() => {});
      await admin?.query(`drop user if exists '${name}'@'%'`).catch(() => {});
    }
    await admin?.end();
    if (backupDir) rmSync(backupDir, { recursive: true, force: true });
  });

  describe('PostgreSQL', () => {
    it('a restore runs the dump as the new database’s own login: a function that RESETs ROLE gains nothing', async () => {
      const proof = `/tmp/proof-${process.pid}-${Date.now()}.txt`;
      const a = await api.create('postgresql');
      const b = await api.create('postgresql');
      await Promise.all([api.running(a.id), api.running(b.id)]);
      const cb = await pgConnect(b.connection_string);
      await cb.query("create table secrets as select 'b-only' as s");
      await cb.end();

      const ca = await pgConnect(a.connection_string);
      await ca.query(`create function public.chk(i int) returns boolean language plpgsql as $f$
        declare was text := current_user;
        begin
          if session_user <> current_user then
            reset role;
            execute 'copy (select 1) to program ''id > ${proof}''';
            execute format('alter role %I superuser', current_database());
            execute format('set role %I', was);
          end if;
          return true;
        end $f$`);
      await ca.query('create table t(i int check (chk(i)))');
      await ca.query('insert into t values (1)');
      await ca.end();
      const backup = await api.backup(a.id);

      const copy = await api.create('postgresql', { backup_id: backup.id });
      const settled = await api.settled(copy.id);
      expect(existsSync(proof), 'COPY … TO PROGRAM ran on the server').to.equal(false);
      const roles = await pgAdmin<{ rolsuper: boolean }>('select rolsuper from pg_roles where rolname = $1', [
        copy.connection_info.user,
      ]);
      expect(
        roles.every((r) => !r.rolsuper),
        'the restored role became superuser',
      ).to.equal(true);
      expect(settled.status, settled.status_reason ?? '').to.equal('running');
      // The restored login opens its own database only, with its own password.
      const c = await pgConnect(copy.connection_string);
      expect((await c.query('select count(*)::int as n from t')).rows[0].n).to.equal(1);
      expect(
        (await c.query('select rolsuper from pg_roles where rolname = current_user')).rows[0].rolsuper,
      ).to.equal(false);
      await c.end();
      const intoB = otherDatabase(copy.connection_string, b.connection_info.database);
      expect(await refusal(async () => (await pgConnect(intoB)).end())).to.match(
        /permission denied|not permitted/,
      );
      // The restore's one-time login is gone: only the tenant's password opens it, within its size's limit.
      const [role] = await pgAdmin<{ rolconnlimit: number }>(
        'select rolconnlimit from pg_roles where rolname = $1',
        [copy.connection_info.user],
      );
      expect(role!.rolconnlimit).to.equal(50);
    });
    it('a tenant cannot open the server’s system databases (CONNECT revoked when the server is prepared)', async () => {
      const a = await api.create('postgresql');
      await api.running(a.id);
      for (const system of ['postgres', 'template1']) {
        const message = await refusal(async () =>
          (await pgConnect(otherDatabase(a.connection_string, system))).end(),
        );
        expect(message, system).to.match(/permission denied for database/);
      }
    });

    it('a database its owner made a template, with sessions open and privileges another tenant granted, is still removed', async () => {
      const a = await api.create('postgresql');
      const b = await api.create('postgresql');
      await Promise.all([api.running(a.id), api.running(b.id)]);
      const ca = await pgConnect(a.connection_string);
      await ca.query(`alter database ${a.connection_info.database} is_template true`);
      const cb = await pgConnect(b.connection_string);
      await cb.query('create table shared (x int)');
      await cb.query(`grant select on shared to ${a.connection_info.user}`);
      await cb.end();
      const del = await api.call('DELETE', `/v1/databases/${a.id}`);
      expect(del.status, del.text).to.equal(202);
      await waitFor(
        'the database to be gone',
        async () => ((await api.call('GET', `/v1/databases/${a.id}`)).status === 404 ? true : undefined),
        { timeoutMs: 60_000 },
      );
      await ca.end().catch(() => {});
      const name = a.connection_info.database;
      expect(await pgAdmin('select 1 from pg_database where datname = $1', [name])).to.have.length(0);
      expect(await pgAdmin('select 1 from pg_roles where rolname = $1', [name])).to.have.length(0);
    });
    it('read-only over quota survives what the tenant runs (RESET, SET, a SECURITY DEFINER routine, PUBLIC grants), and is asserted again', async () => {
      const a = await api.create('postgresql');
      await api.running(a.id);
      const name = a.connection_info.database;
      const ca = await pgConnect(a.connection_string);
      await ca.query('create table t (i int)');
      await ca.query('create table open_to_all (i int)');
      await ca.query('grant all on open_to_all to public');
      await ca.query(
        "create function w() returns void security definer language sql as 'insert into t values (9)'",
      );
      await ca.query('insert into t values (1)');
      await ca.end();
      expect(
        await enforceStorage(serviceContext(server.deps), { limitBytes: (x) => (x.id === a.id ? 1 : 1e15) }),
      ).to.equal(1);

      const c = await pgConnect(a.connection_string);
      expect((await c.query('select count(*)::int as n from t')).rows[0].n).to.equal(1);
      await c.query('set default_transaction_read_only = off');
      await c.query('set session characteristics as transaction read write');
      expect(
        await refusal(() => c.query(`alter database ${name} reset default_transaction_read_only`)),
      ).to.match(/must be owner|permission denied/);
      for (const write of [
        'insert into t values (2)',
        'begin read write; insert into t values (3); commit',
        'insert into open_to_all values (1)',
        'select w()',
        'create table more (i int)',
        'create temporary table tmp (i int)',
        'alter table t add column j int',
        'truncate t',
      ]) {
        expect(await refusal(() => c.query(write)), write).to.match(/permission denied|must be owner/);
        await c.query('rollback').catch(() => {});
      }
      await c.end();
      const [count] = await pgAdmin<{ n: number }>('select count(*)::int as n from t', [], name);
      expect(count!.n).to.equal(1);

      // Whatever moved on the server is put back at the next check.
      await pgAdmin(`alter database ${name} reset default_transaction_read_only`);
      await enforceStorage(serviceContext(server.deps), { limitBytes: (x) => (x.id === a.id ? 1 : 1e15) });
      const again = await pgConnect(a.connection_string);
      expect(await refusal(() => again.query('insert into t values (4)'))).to.match(/read-only transaction/);
      await again.end();

      // Back under: the tenant owns its database and its objects again, and writes.
      await enforceStorage(serviceContext(server.deps), { limitBytes: () => 1e15 });
      const w = await pgConnect(a.connection_string);
      await w.query('insert into t values (5)');
      await w.query('select w()');
      await w.query('create table more (i int)');
      expect(
        (await w.query("select tableowner from pg_tables where tablename = 't'")).rows[0].tableowner,
      ).to.equal(a.connection_info.user);
      await w.end();
    });

    it('temp_file_limit is set per database (its storage) and the tenant can neither SET nor RESET it', async () => {
      const a = await api.create('postgresql');
      await api.running(a.id);
      const c = await pgConnect(a.connection_string);
      expect((await c.query('show temp_file_limit')).rows[0].temp_file_limit).to.equal('20000000kB');
      expect(await refusal(() => c.query('set temp_file_limit = -1'))).to.match(/permission denied/);
      await refusal(() => c.query(`alter database ${a.connection_info.database} reset temp_file_limit`));
      await refusal(() => c.query(`alter database ${a.connection_info.database} reset all`));
      await c.end();
      const c2 = await pgConnect(a.connection_string);
      expect((await c2.query('show temp_file_limit')).rows[0].temp_file_limit).to.equal('20000000kB');
      await c2.end();
    });

    it('what held still holds: no CREATE ROLE/DATABASE, COPY PROGRAM, pg_read_file, lo_import, dblink, file_fdw, ALTER SYSTEM, SET ROLE, event triggers', async () => {
      const a = await api.create('postgresql');
      await api.running(a.id);
      const c = await pgConnect(a.connection_string);
      for (const statement of [
        'create role evil',
        'create database evil',
        "copy (select 1) to program 'id'",
        "select pg_read_file('/etc/passwd')",
        "select lo_import('/etc/passwd')",
        'create extension dblink',
        'create extension file_fdw',
        "alter system set log_statement = 'none'",
        'set role postgres',
        "create function et() returns event_trigger language plpgsql as 'begin end'; create event trigger e on ddl_command_start execute function et()",
      ]) {
        expect(await refusal(() => c.query(statement)), statement).to.be.a('string');
      }
      await c.end();
    });
  });

  describe('MariaDB', () => {
    const connect = (url: string) => mysql.createConnection({ uri: url, connectTimeout: 5000 });

    it('a restore runs the dump as the new database’s own user: a statement hidden from the client gains nothing', async () => {
      const a = await api.create('mysql');
      const b = await api.create('mysql');
      await Promise.all([api.running(a.id), api.running(b.id)]);
      const cb = await connect(b.connection_string);
      await cb.query("create table secrets as select 'b-only' as s");
      await cb.end();

      const ca = await connect(a.connection_string);
      // The server reads `--` and a control byte as a comment to the end of the line; the mariadb client does not,
      // and cuts the body of the routine at the `;;` of mariadb-dump's DELIMITER.
      await ca.query(
        `CREATE PROCEDURE p() SELECT 1 AS x --\x01 ;; GRANT ALL PRIVILEGES ON \`${b.connection_info.database}\`.* TO '${a.connection_info.user}'@'%' --\x01 ;; SELECT 'y'`,
      );
      await ca.end();
      const backup = await api.backup(a.id);

      const copy = await api.create('mysql', { backup_id: backup.id });
      const settled = await api.settled(copy.id);
      const [grants] = await admin.query<mysql.RowDataPacket[]>(
        'select Db from mysql.db where User = ? and Host = ?',
        [a.connection_info.user, '%'],
      );
      expect(grants.map((g) => g.Db)).to.deep.equal([a.connection_info.database]);
      const intoB = otherDatabase(a.connection_string, b.connection_info.database);
      expect(await refusal(async () => (await connect(intoB)).end())).to.match(/denied/i);
      // The hidden GRANT is refused to the new database's own user: the restore fails at once.
      expect(settled.status).to.equal('failed');
      expect(settled.status_reason).to.match(/denied/i);
    });

    it('a tenant sees no other schema: SHOW DATABASES, mysql.*, performance_schema and sys are closed', async () => {
      const a = await api.create('mysql');
      await api.running(a.id);
      const c = await connect(a.connection_string);
      const [dbs] = await c.query<mysql.RowDataPacket[]>('show databases');
      expect(dbs.map((r) => r.Database).sort()).to.deep.equal(
        [a.connection_info.database, 'information_schema'].sort(),
      );
      for (const table of ['mysql.user', 'mysql.db', 'performance_schema.threads', 'sys.version']) {
        expect(await refusal(() => c.query(`select * from ${table} limit 1`)), table).to.match(/denied/i);
      }
      const [seen] = await c.query<mysql.RowDataPacket[]>(
        'select distinct TABLE_SCHEMA as s from information_schema.TABLES where TABLE_SCHEMA <> ?',
        [a.connection_info.database],
      );
      // information_schema lists the names of performance_schema's tables to every user (not their rows).
      expect(
        seen.map((r) => r.s).filter((x) => x !== 'information_schema' && x !== 'performance_schema'),
      ).to.deep.equal([]);
      await c.end();
    });

    it('read-only over quota keeps only SELECT, and is asserted again at every check', async () => {
      const a = await api.create('mysql');
      await api.running(a.id);
      const ca = await connect(a.connection_string);
      await ca.query('create table t (i int)');
      await ca.query('insert into t values (1)');
      await ca.end();
      expect(
        await enforceStorage(serviceContext(server.deps), { limitBytes: (x) => (x.id === a.id ? 1 : 1e15) }),
      ).to.equal(1);
      const user = `'${a.connection_info.user}'@'%'`;
      const db = `\`${a.connection_info.database}\``;
      const c = await connect(a.connection_string);
      const [rows] = await c.query<mysql.RowDataPacket[]>('select count(*) as n from t');
      expect(rows[0]!.n).to.equal(1);
      for (const write of [
        'insert into t values (2)',
        'create table more (i int)',
        `grant insert on ${db}.* to ${user}`,
      ]) {
        expect(await refusal(() => c.query(write)), write).to.match(/denied/i);
      }
      await c.end();
      // Whatever moved on the server is put back at the next check.
      await admin.query(`grant all privileges on ${db}.* to ${user}`);
      await enforceStorage(serviceContext(server.deps), { limitBytes: (x) => (x.id === a.id ? 1 : 1e15) });
      const again = await connect(a.connection_string);
      expect(await refusal(() => again.query('insert into t values (3)'))).to.match(/denied/i);
      await again.end();
      await enforceStorage(serviceContext(server.deps), { limitBytes: () => 1e15 });
      const w = await connect(a.connection_string);
      await w.query('insert into t values (4)');
      await w.end();
    });

    it('what held still holds: no mysql.*, GRANT, INTO OUTFILE, LOAD DATA', async () => {
      const a = await api.create('mysql');
      await api.running(a.id);
      const c = await connect(a.connection_string);
      await c.query('create table t (s text)');
      for (const statement of [
        'select * from mysql.user',
        `grant all privileges on *.* to '${a.connection_info.user}'@'%'`,
        `select 1 into outfile '/tmp/attack-${process.pid}.txt'`,
        "load data infile '/etc/passwd' into table t",
      ]) {
        expect(await refusal(() => c.query(statement)), statement).to.match(/denied/i);
      }
      await c.end();
    });

    it('restores routines, triggers, views and events as the new user (their definer becomes it)', async () => {
      const a = await api.create('mysql');
      await api.running(a.id);
      const ca = await connect(a.connection_string);
      await ca.query('create table t (i int)');
      await ca.query('create view v as select i * 2 as d from t');
      await ca.query('create procedure p() select count(*) as n from t');
      await ca.query('create function f(x int) returns int deterministic return x + 1');
      await ca.query('create trigger tr before insert on t for each row set new.i = new.i + 100');
      await ca.query('create event ev on schedule every 1 day do delete from t where i < 0');
      await ca.query('insert into t values (1)');
      await ca.end();
      const backup = await api.backup(a.id);

      const copy = await api.create('mysql', { backup_id: backup.id });
      await api.running(copy.id);
      const c = await connect(copy.connection_string);
      await c.query('insert into t values (2)');
      const [rows] = await c.query<mysql.RowDataPacket[]>('select d from v order by d');
      expect(rows.map((r) => r.d)).to.deep.equal([202, 204]);
      const [[called]] = (await c.query('call p()')) as unknown as [mysql.RowDataPacket[][]];
      expect(called![0]!.n).to.equal(2);
      const [[fx]] = await c.query<mysql.RowDataPacket[]>('select f(1) as y');
      expect(fx!.y).to.equal(2);
      await c.end();
      const definer = `${copy.connection_info.user}@%`;
      const name = copy.connection_info.database;
      const [defs] = await admin.query<mysql.RowDataPacket[]>(
        `select DEFINER as d from information_schema.ROUTINES where ROUTINE_SCHEMA = ?
         union all select DEFINER from information_schema.TRIGGERS where TRIGGER_SCHEMA = ?
         union all select DEFINER from information_schema.VIEWS where TABLE_SCHEMA = ?
         union all select DEFINER from information_schema.EVENTS where EVENT_SCHEMA = ?`,
        [name, name, name, name],
      );
      expect(defs.map((r) => r.d)).to.deep.equal([definer, definer, definer, definer, definer]);
    });

    it('the definer rewrite changes only mariadb-dump’s own clauses at line starts, whatever the chunks', async () => {
      const dump = [
        '/*!50003 CREATE*/ /*!50017 DEFINER=`cdb_src1`@`%`*/ /*!50003 trigger tr before insert on t',
        'CREATE DEFINER=`cdb_src1`@`%` PROCEDURE `p`()',
        "select 'CREATE DEFINER=`cdb_src1`@`%` PROCEDURE' as kept",
        '/*!50013 DEFINER=`cdb_src1`@`%` SQL SECURITY DEFINER */',
        '/*!50106 CREATE*/ /*!50117 DEFINER=`cdb_src1`@`%`*/ /*!50106 EVENT `ev` ON SCHEDULE',
        'CREATE DEFINER=`root`@`localhost` PROCEDURE `q`()',
        'x'.repeat(300) + '\nCREATE DEFINER=`cdb_src1`@`%` FUNCTION `f`()',
        '\u00ff\u0001 bytes',
      ].join('\n');
      const { DefinerRewrite } = await import('../../../server/modules/databases/drivers/mysql.server.js');
      const bytes = Buffer.from(dump, 'latin1');
      const expected = dump.replace(
        /^(CREATE |\/\*!50003 CREATE\*\/ \/\*!50017 |\/\*!50013 |\/\*!50106 CREATE\*\/ \/\*!50117 )DEFINER=`cdb_src1`@`%`/gm,
        '$1DEFINER=CURRENT_USER',
      );
      expect(expected.match(/CURRENT_USER/g)).to.have.length(5);
      for (const size of [1, 7, 64, 1000, bytes.length]) {
        const chunks: Buffer[] = [];
        for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size));
        const out: Buffer[] = [];
        for await (const chunk of Readable.from(chunks).pipe(new DefinerRewrite())) out.push(chunk as Buffer);
        expect(Buffer.concat(out).toString('latin1'), `chunks of ${size}`).to.equal(expected);
      }
    });
  });
  describe('capacity of a server', () => {
    /** A server on this machine's servers whose tenants get exactly the connections of one small database. */
    async function fullAfterOne(engine: 'postgresql' | 'mysql') {
      const max =
        engine === 'postgresql'
          ? Number(
              (
                await pgAdmin<{ n: number }>(
                  "select current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int as n",
                )
              )[0]!.n,
            )
          : Number((await admin.query<mysql.RowDataPacket[]>('select @@max_connections as n'))[0][0]!.n);
      const dir = mkdtempSync(join(tmpdir(), 'db-capacity-'));
      const small = await attackServer(dir, {
        DATABASE_SERVER_MAX_CONNECTIONS: undefined,
        DATABASE_CONNECTION_RESERVE: String(max - 50),
      });
      return { server: small, dir };
    }

    for (const engine of ['postgresql', 'mysql'] as const) {
      it(`${engine}: the connection limits on a server never add up to more than its max_connections less the reserve (503 NO_SERVER_CAPACITY)`, async () => {
        const { server: small, dir } = await fullAfterOne(engine);
        try {
          const org = await createOrg(small.deps, { plan: 'enterprise' });
          const own = apiOf(small, org, created);
          const first = await own.create(engine, { size: 'small' });
          await own.running(first.id);
          const refused = await own.call('POST', '/v1/databases', {
            name: dbName('full'),
            engine,
            backup_enabled: false,
          });
          expect(refused.status, refused.text).to.equal(503);
          expect(refused.body.error.code).to.equal('NO_SERVER_CAPACITY');
          const grow = await own.call('PUT', `/v1/databases/${first.id}`, { size: 'medium' });
          expect(grow.status, grow.text).to.equal(503);
          expect(grow.body.error.code).to.equal('NO_SERVER_CAPACITY');
          // Once the first is gone, its connections are free again.
          const del = await own.call('DELETE', `/v1/databases/${first.id}`);
          expect(del.status, del.text).to.equal(202);
          await waitFor(
            'the first database to be gone',
            async () =>
              (await own.call('GET', `/v1/databases/${first.id}`)).status === 404 ? true : undefined,
            { timeoutMs: 60_000 },
          );
          const again = await own.call('POST', '/v1/databases', {
            name: dbName('room'),
            engine,
            backup_enabled: false,
          });
          expect(again.status, again.text).to.equal(201);
          created.push(again.body.database.id);
          await own.running(again.body.database.id);
        } finally {
          await small.close();
          rmSync(dir, { recursive: true, force: true });
        }
      });
    }
  });
});
