import pg from 'pg';
import type { DatabaseInstance } from '../databases.driver.js';
import type { DatabaseHost } from '../../../lib/database-hosts.js';
import type { BackupStore } from './backup-store.js';
import {
  restoreMismatch,
  assertName,
  dumpInto,
  runTool,
  safeError,
  type CreateSpec,
  type EngineServer,
} from './engine-server.js';

const { Pool, escapeIdentifier: ident, escapeLiteral: literal } = pg;

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

  /** The environment of pg_dump and pg_restore: the admin connection, the password in PGPASSWORD. */
  private toolEnv(database: string): Record<string, string> {
    const env: Record<string, string> = {
      PGHOST: this.host.host,
      PGPORT: String(this.host.port),
      PGUSER: decodeURIComponent(this.url.username || 'postgres'),
      PGDATABASE: database,
      PGCONNECT_TIMEOUT: '10',
    };
    if (this.url.password) env.PGPASSWORD = decodeURIComponent(this.url.password);
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
      const attributes = `login nosuperuser nocreatedb nocreaterole noreplication inherit connection limit 0 password ${literal(verifier)}`;
      await this.sql(`${role.rowCount ? 'alter' : 'create'} role ${ident(name)} ${attributes}`);
      await this.sql(`grant cloud_databases to ${ident(name)}`);
      await this.sql(`create database ${ident(name)} owner ${ident(name)}`);
      await this.sql(`revoke all on database ${ident(name)} from public`);
      if (restore) {
        await runTool(
          'pg_restore',
          ['--no-owner', '--no-acl', `--role=${name}`, '--exit-on-error', '--dbname', name, restore.file],
          { env: this.toolEnv(name), secrets: this.secrets },
        );
        await restore.verified;
      }
      // Logins open only once everything is in place.
      await this.applySize(instance, maxConnections);
    } catch (err) {
      await this.destroy(instance).catch(() => {});
      // A dump that does not match its checksum makes the restore fail too: say why.
      throw safeError((await restoreMismatch(restore)) ?? err, this.secrets);
    }
  }

  async applySize(instance: DatabaseInstance, maxConnections: number): Promise<void> {
    assertName(instance.dbUser);
    await this.sql(`alter role ${ident(instance.dbUser)} connection limit ${Math.trunc(maxConnections)}`);
  }

  async setVerifier(instance: DatabaseInstance, verifier: string): Promise<void> {
    assertName(instance.dbUser);
    await this.sql(`alter role ${ident(instance.dbUser)} password ${literal(verifier)}`);
    await this.terminate('usename', instance.dbUser);
  }

  async dump(instance: DatabaseInstance, store: BackupStore, backupId: string): Promise<number> {
    assertName(instance.dbName);
    return dumpInto(store, backupId, 'pg_dump', ['--format=custom', '--compress=1'], {
      env: this.toolEnv(instance.dbName),
      secrets: this.secrets,
      // pg_dump's custom format starts with its magic.
      checkOutput: ({ head }) =>
        head.subarray(0, 5).toString('latin1') === 'PGDMP' ? null : 'not a whole dump',
    });
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
    await this.sql(`drop database if exists ${ident(instance.dbName)} with (force)`);
    await this.sql(`drop role if exists ${ident(instance.dbUser)}`);
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

  async setReadOnly(instance: DatabaseInstance, readOnly: boolean): Promise<void> {
    assertName(instance.dbName);
    await this.sql(
      readOnly
        ? `alter database ${ident(instance.dbName)} set default_transaction_read_only = on`
        : `alter database ${ident(instance.dbName)} reset default_transaction_read_only`,
    );
    // Sessions read the setting when they start.
    await this.terminate('datname', instance.dbName);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
