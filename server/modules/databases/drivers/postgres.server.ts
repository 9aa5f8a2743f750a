import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PermanentDriverError, type DatabaseInstance } from '../databases.driver.js';
import { SIZE_SPECS } from '../databases.constants.js';
import type { DatabaseHost } from '../../../lib/database-hosts.js';
import type { BackupStore } from './backup-store.js';
import {
  assertName,
  dumpBoundArgs,
  dumpInto,
  runTool,
  safeError,
  scramVerifier,
  type CreateSpec,
  type EngineServer,
} from './engine-server.js';

const { Pool, escapeIdentifier: ident, escapeLiteral: literal } = pg;

/** The NOLOGIN role that owns the objects of the database of `login` while it is read-only: one per database. */
function keeperOf(login: string): string {
  const keeper = `cdbo_${login.slice('cdb_'.length)}`;
  if (!/^cdbo_[a-z0-9]{1,59}$/.test(keeper)) throw new Error('invalid managed database name');
  return keeper;
}

/**
 * A PostgreSQL server of `DATABASE_HOSTS` (docs/databases.md, "Databases", Real servers). Each database is a database and a
 * login role of the same name (`cdb_<id>`), owning only that database: NOSUPERUSER NOCREATEDB NOCREATEROLE
 * NOREPLICATION, `CONNECT` revoked from PUBLIC, the connection limit of its size. Every role is also a member of
 * `cloud_databases` (no privileges), which `pg_hba.conf` can name to require passwords (docs/deploying.md).
 */
export class PostgresServer implements EngineServer {
  private readonly pool: pg.Pool;
  private readonly url: URL;
  private readonly secrets: string[];
  private prepared: Promise<string[]> | null = null;

  constructor(private readonly host: DatabaseHost) {
    this.url = new URL(host.adminUrl);
    this.secrets = [host.adminUrl, decodeURIComponent(this.url.password)];
    this.pool = new Pool({
      connectionString: host.adminUrl,
      max: 3,
      connectionTimeoutMillis: 5000,
      allowExitOnIdle: true,
    });
    // An idle admin connection that breaks (server restart) must not crash the process.
    this.pool.on('error', () => {});
  }

  private async sql<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, params: unknown[] = []) {
    try {
      return await this.pool.query<R>(text, params);
    } catch (err) {
      throw safeError(err, this.secrets);
    }
  }

  /** The environment of a client tool logged in as `user` with `password` (PGPASSWORD, never argv). */
  private toolEnv(database: string, login?: { user: string; password: string }): Record<string, string> {
    const env: Record<string, string> = {
      PGHOST: this.host.host,
      PGPORT: String(this.host.port),
      PGUSER: login?.user ?? decodeURIComponent(this.url.username || 'postgres'),
      PGDATABASE: database,
      PGCONNECT_TIMEOUT: '10',
    };
    const password = login ? login.password : decodeURIComponent(this.url.password);
    if (password) env.PGPASSWORD = password;
    const sslmode = this.url.searchParams.get('sslmode');
    if (sslmode) env.PGSSLMODE = sslmode;
    return env;
  }

  private async terminate(column: 'datname' | 'usename', name: string): Promise<void> {
    await this.sql(
      `select pg_terminate_backend(pid) from pg_stat_activity where ${column} = $1 and pid <> pg_backend_pid()`,
      [name],
    );
  }

  async create(instance: DatabaseInstance, { verifier, restore, maxConnections }: CreateSpec): Promise<void> {
    const name = instance.dbName;
    assertName(name);
    try {
      await this.prepare();
      // A database left by an attempt that did not finish (a crash, a failed restore) is made again from scratch:
      // it was never `running`, so it holds nothing of its owner's.
      const existing = await this.sql('select 1 from pg_database where datname = $1', [name]);
      if (existing.rowCount) await this.sql(`drop database ${ident(name)} with (force)`);
      await this.sql(
        `do $$ begin
           if not exists (select from pg_roles where rolname = 'cloud_databases') then
             create role cloud_databases nologin;
           end if;
         exception when duplicate_object then null; end $$`,
      );
      const role = await this.sql('select 1 from pg_roles where rolname = $1', [name]);
      // A restore runs as the new database's own login (docs/security.md, "Tenants of the database servers"): what
      // the dump holds (functions, checks, defaults) can never do more than its owner. The login gets a one-time
      // password only the restore knows and one connection, and the tenant's own password once it is done.
      const once = restore ? randomBytes(24).toString('base64url') : null;
      const attributes = `login nosuperuser nocreatedb nocreaterole noreplication inherit connection limit ${once ? 1 : 0} password ${literal(once ? scramVerifier(once) : verifier)}`;
      await this.sql(`${role.rowCount ? 'alter' : 'create'} role ${ident(name)} ${attributes}`);
      await this.sql(`grant cloud_databases to ${ident(name)}`);
      await this.sql(`create database ${ident(name)} owner ${ident(name)}`);
      await this.sql(`revoke all on database ${ident(name)} from public`);
      if (restore && once) {
        await runTool(
          'pg_restore',
          ['--no-owner', '--no-acl', '--exit-on-error', '--dbname', name, restore.file],
          {
            env: this.toolEnv(name, { user: name, password: once }),
            secrets: [...this.secrets, once],
          },
        ).catch((err: unknown) => {
          // A statement of the dump the login's rights refuse fails every time: no retry.
          const message = err instanceof Error ? err.message : String(err);
          throw /could not execute query|COPY failed/.test(message) ? new PermanentDriverError(message) : err;
        });
        await this.sql(`alter role ${ident(name)} connection limit 0 password ${literal(verifier)}`);
        // Nothing the restore started outlives it.
        await this.terminate('usename', name);
      }
      // Logins open only once everything is in place.
      await this.applySize(instance, maxConnections);
    } catch (err) {
      await this.destroy(instance).catch(() => {});
      throw safeError(err, this.secrets);
    }
  }

  async applySize(instance: DatabaseInstance, maxConnections: number): Promise<void> {
    assertName(instance.dbUser);
    assertName(instance.dbName);
    await this.sql(`alter role ${ident(instance.dbUser)} connection limit ${Math.trunc(maxConnections)}`);
    // The temporary files of one session (sorts, hashes, temporary tables) never exceed the database's storage; a
    // parameter only a superuser sets, so the tenant can neither SET nor RESET it.
    const kb = Math.min(2_147_483_647, Math.trunc(SIZE_SPECS[instance.size].storageGb * 1e6));
    await this.sql(`alter database ${ident(instance.dbName)} set temp_file_limit = ${kb}`);
  }

  async setVerifier(instance: DatabaseInstance, verifier: string): Promise<void> {
    assertName(instance.dbUser);
    await this.sql(`alter role ${ident(instance.dbUser)} password ${literal(verifier)}`);
    await this.terminate('usename', instance.dbUser);
  }

  async dump(instance: DatabaseInstance, store: BackupStore, backupId: string): Promise<number> {
    assertName(instance.dbName);
    return dumpInto(
      store,
      backupId,
      'pg_dump',
      ['--format=custom', '--compress=1', ...dumpBoundArgs('postgresql')],
      {
        env: this.toolEnv(instance.dbName),
        secrets: this.secrets,
        // pg_dump's custom format starts with its magic.
        checkOutput: ({ head }) =>
          head.subarray(0, 5).toString('latin1') === 'PGDMP' ? null : 'not a whole dump',
      },
    );
  }

  async destroy(instance: DatabaseInstance): Promise<void> {
    assertName(instance.dbName);
    assertName(instance.dbUser);
    const role = await this.sql('select 1 from pg_roles where rolname = $1', [instance.dbUser]);
    if (role.rowCount) {
      // No new session, then none left.
      await this.sql(`alter role ${ident(instance.dbUser)} nologin`);
      await this.terminate('usename', instance.dbUser);
    }
    // What its owner may set on its database never keeps it: a template cannot be dropped.
    const db = await this.sql('select datistemplate from pg_database where datname = $1', [instance.dbName]);
    if (db.rows[0]?.datistemplate) {
      await this.sql(`alter database ${ident(instance.dbName)} with is_template false`);
    }
    await this.sql(`drop database if exists ${ident(instance.dbName)} with (force)`);
    await this.dropRole(instance.dbUser);
    await this.dropRole(keeperOf(instance.dbUser));
  }

  /**
   * Drops a login, and first what still names it in other databases (a privilege another tenant granted it, a
   * read-only owner role's objects): those would keep it alive.
   */
  private async dropRole(name: string): Promise<void> {
    const { rows } = await this.sql<{ datname: string }>(
      `select distinct d.datname from pg_shdepend s join pg_database d on d.oid = s.dbid
        where s.refobjid = (select oid from pg_roles where rolname = $1) and d.datallowconn`,
      [name],
    );
    for (const { datname } of rows) await this.sqlIn(datname, `drop owned by ${ident(name)}`);
    await this.sql(`drop role if exists ${ident(name)}`);
  }

  /** One statement as the admin in another database of the server. */
  private async sqlIn(database: string, text: string): Promise<void> {
    const url = new URL(this.host.adminUrl);
    url.pathname = `/${encodeURIComponent(database)}`;
    const client = new pg.Client({ connectionString: url.href, connectionTimeoutMillis: 5000 });
    client.on('error', () => {});
    try {
      await client.connect();
      // A read-only database's setting applies to the admin's sessions in it too.
      await client.query('set default_transaction_read_only = off');
      await client.query(text);
    } catch (err) {
      throw safeError(err, this.secrets);
    } finally {
      await client.end().catch(() => {});
    }
  }

  async maxConnections(): Promise<number> {
    const { rows } = await this.sql<{ n: number }>(
      `select (current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
               - coalesce(current_setting('reserved_connections', true)::int, 0)) as n`,
    );
    return Number(rows[0]!.n);
  }

  /**
   * Closes the server's system databases to tenants (docs/security.md, "Tenants of the database servers"): CONNECT
   * on `postgres` and `template1` is revoked from PUBLIC, once per process, before any database is created. Says
   * which other databases of the server still let any login in (tenants could open them).
   */
  prepare(): Promise<string[]> {
    this.prepared ??= (async () => {
      for (const name of ['postgres', 'template1']) {
        const found = await this.sql('select 1 from pg_database where datname = $1', [name]);
        if (found.rowCount)
          await this.sql(`revoke connect, temporary on database ${ident(name)} from public`);
      }
      const { rows } = await this.sql<{ datname: string }>(
        `select datname from pg_database
          where datallowconn and datname !~ '^cdb_' and has_database_privilege('public', oid, 'connect')
          order by datname`,
      );
      return rows.length
        ? [
            `${rows.length} database(s) of the server let any login connect (tenants can open them): ` +
              rows
                .slice(0, 5)
                .map((r) => r.datname)
                .join(', ') +
              (rows.length > 5 ? ', …' : ''),
          ]
        : [];
    })().catch((err: unknown) => {
      this.prepared = null;
      throw err;
    });
    return this.prepared;
  }

  async load(instance: DatabaseInstance) {
    const { rows } = await this.sql<{ sessions: number; busy: number; bytes: string | null }>(
      `select (select count(*) from pg_stat_activity where datname = $1)::int as sessions,
              (select count(*) from pg_stat_activity where datname = $1 and state = 'active')::int as busy,
              (select pg_database_size(oid) from pg_database where datname = $1)::bigint as bytes`,
      [instance.dbName],
    );
    const r = rows[0];
    if (!r || r.bytes === null) return null;
    return { sessions: r.sessions, busy: r.busy, bytes: Number(r.bytes) };
  }

  /**
   * Read-only over its storage (docs/security.md, "Tenants of the database servers"). A setting is no boundary on
   * PostgreSQL (a session SETs it off), so the login stops owning anything: every object of the database, and the
   * database itself, go to a role of that database's own (`cdbo_<id>`, NOLOGIN), the login keeps CONNECT, USAGE and
   * SELECT, its routines stay its own (so that a SECURITY DEFINER one runs with its rights), and write privileges
   * granted to PUBLIC are revoked. `default_transaction_read_only` stays as the message a client sees. Back under,
   * everything returns to the login. Cheap when the server is already in that state (one read): the check runs for
   * every read-only database at every sweep.
   */
  async setReadOnly(instance: DatabaseInstance, readOnly: boolean): Promise<void> {
    const db = instance.dbName;
    const login = instance.dbUser;
    assertName(db);
    assertName(login);
    const keeper = keeperOf(login);
    const { rows } = await this.sql<{ owner: string; flagged: boolean }>(
      `select pg_get_userbyid(d.datdba) as owner,
              exists (select from pg_db_role_setting s where s.setdatabase = d.oid and s.setrole = 0
                        and 'default_transaction_read_only=on' = any (s.setconfig)) as flagged
         from pg_database d where d.datname = $1`,
      [db],
    );
    const state = rows[0];
    if (!state) return;
    if (readOnly ? state.owner === keeper && state.flagged : state.owner === login && !state.flagged) return;
    if (readOnly) {
      await this.sql(
        `do $$ begin
           if not exists (select from pg_roles where rolname = ${literal(keeper)}) then
             create role ${ident(keeper)} nologin;
           end if;
         end $$`,
      );
      await this.sqlIn(
        db,
        `begin;
         reassign owned by ${ident(login)} to ${ident(keeper)};
         do $$ declare r record; begin
           for r in select p.oid::regprocedure as sig from pg_proc p
                     where p.proowner = ${literal(keeper)}::regrole
                       and not exists (select from pg_depend d where d.classid = 'pg_proc'::regclass
                                         and d.objid = p.oid and d.deptype = 'e') loop
             execute format('alter routine %s owner to %I', r.sig, ${literal(login)});
           end loop;
           for r in select nspname from pg_namespace
                     where nspowner in (${literal(keeper)}::regrole, 'pg_database_owner'::regrole) loop
             execute format('grant usage on schema %I to %I', r.nspname, ${literal(login)});
             execute format('grant select on all tables in schema %I to %I', r.nspname, ${literal(login)});
             execute format('grant select on all sequences in schema %I to %I', r.nspname, ${literal(login)});
             execute format('revoke insert, update, delete, truncate on all tables in schema %I from public', r.nspname);
             execute format('revoke usage, update on all sequences in schema %I from public', r.nspname);
           end loop;
         end $$;
         grant connect on database ${ident(db)} to ${ident(login)};
         commit;`,
      );
      await this.sql(`alter database ${ident(db)} set default_transaction_read_only = on`);
    } else {
      if (state.owner === keeper) {
        await this.sqlIn(db, `reassign owned by ${ident(keeper)} to ${ident(login)}`);
      }
      await this.sql(`alter database ${ident(db)} reset default_transaction_read_only`);
    }
    // Sessions read the setting when they start, and none keeps a statement begun under the other state.
    await this.terminate('datname', db);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
