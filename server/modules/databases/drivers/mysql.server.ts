import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import mysql from 'mysql2/promise';
import { PermanentDriverError, type DatabaseInstance } from '../databases.driver.js';
import type { DatabaseHost } from '../../../lib/database-hosts.js';
import type { BackupStore } from './backup-store.js';
import {
  assertName,
  dumpBoundArgs,
  dumpInto,
  mysqlNativeHash,
  runTool,
  safeError,
  type CreateSpec,
  type EngineServer,
} from './engine-server.js';

/** A backquoted identifier (names are checked by assertName as well). */
const ident = (name: string) => {
  assertName(name);
  return `\`${name}\``;
};

/**
 * A MariaDB (or MySQL) server of `DATABASE_HOSTS` (docs/databases.md, "Databases", Real servers). Each database is a database
 * `cdb_<id>` and a user `'cdb_<id>'@'%'` with every privilege on that database only, and `MAX_USER_CONNECTIONS`
 * of its size. The client tools read the admin password from an options file of mode 0600, never from argv.
 */
export class MysqlServer implements EngineServer {
  private readonly pool: mysql.Pool;
  private readonly url: URL;
  private readonly secrets: string[];

  constructor(private readonly host: DatabaseHost) {
    this.url = new URL(host.adminUrl);
    this.secrets = [host.adminUrl, decodeURIComponent(this.url.password)];
    this.pool = mysql.createPool({
      host: host.host,
      port: host.port,
      user: decodeURIComponent(this.url.username || 'root'),
      password: decodeURIComponent(this.url.password),
      connectionLimit: 3,
      connectTimeout: 5000,
      multipleStatements: false,
    });
  }

  private async sql<R = mysql.RowDataPacket[]>(text: string, params: unknown[] = []): Promise<R> {
    try {
      const [rows] = await this.pool.query(text, params);
      return rows as R;
    } catch (err) {
      throw safeError(err, this.secrets);
    }
  }

  /**
   * Runs a client tool with `[client]` options in a 0600 file removed afterwards: the admin's, or `login`'s (a
   * tenant's user with a one-time password).
   */
  private async withOptions<T>(
    run: (file: string) => Promise<T>,
    login?: { user: string; password: string },
  ): Promise<T> {
    const dir = await mkdtemp(join(tmpdir(), 'cloud-mysql-'));
    const file = join(dir, 'client.cnf');
    const quote = (v: string) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
    const password = login ? login.password : decodeURIComponent(this.url.password);
    const lines = [
      '[client]',
      `host=${quote(this.host.host)}`,
      `port=${this.host.port}`,
      `user=${quote(login?.user ?? decodeURIComponent(this.url.username || 'root'))}`,
    ];
    if (password) lines.push(`password=${quote(password)}`);
    try {
      await writeFile(file, `${lines.join('\n')}\n`, { mode: 0o600 });
      return await run(file);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  private async killSessions(user: string): Promise<void> {
    const rows = await this.sql<{ ID: number }[]>(
      'select ID from information_schema.PROCESSLIST where USER = ? and ID <> connection_id()',
      [user],
    );
    for (const r of rows) await this.sql(`kill connection ${Number(r.ID)}`).catch(() => {});
  }

  private async userExists(user: string): Promise<boolean> {
    const rows = await this.sql<unknown[]>("select 1 from mysql.user where User = ? and Host = '%'", [user]);
    return rows.length > 0;
  }

  async create(instance: DatabaseInstance, { verifier, restore, maxConnections }: CreateSpec) {
    const db = ident(instance.dbName);
    const user = `${ident(instance.dbUser).replace(/`/g, "'")}@'%'`;
    try {
      // A database left by an attempt that did not finish is made again from scratch (it was never `running`).
      await this.sql(`drop database if exists ${db}`);
      const limit = Math.trunc(maxConnections);
      // A restore runs as the new database's own user (docs/security.md, "Tenants of the database servers"), never
      // as root: the user gets a one-time password only the restore knows and one connection, then its own.
      const once = restore ? randomBytes(24).toString('base64url') : null;
      const identified = `identified by password ? with max_user_connections ${once ? 1 : limit}`;
      const hash = once ? mysqlNativeHash(once) : verifier;
      if (await this.userExists(instance.dbUser)) {
        await this.sql(`alter user ${user} ${identified}`, [hash]);
      } else {
        await this.sql(`create user ${user} ${identified}`, [hash]);
      }
      await this.sql(`create database ${db} character set utf8mb4 collate utf8mb4_unicode_ci`);
      if (restore && once) {
        await this.sql(`grant all privileges on ${db}.* to ${user}`);
        await this.withOptions(
          (options) =>
            runTool('mariadb', [`--defaults-extra-file=${options}`, '--batch', instance.dbName], {
              env: {},
              secrets: [...this.secrets, once],
              stdinFile: restore.file,
              stdinTransform: new DefinerRewrite(),
            }).catch((err: unknown) => {
              // A statement of the dump the user's rights refuse fails every time: no retry.
              const message = err instanceof Error ? err.message : String(err);
              throw /ERROR \d+ \(\w+\) at line \d+/.test(message) ? new PermanentDriverError(message) : err;
            }),
          { user: instance.dbUser, password: once },
        );
        await this.sql(`alter user ${user} identified by password ? with max_user_connections ${limit}`, [
          verifier,
        ]);
        // Nothing the restore started outlives it.
        await this.killSessions(instance.dbUser);
      } else {
        // The user can log in only once everything is in place.
        await this.sql(`grant all privileges on ${db}.* to ${user}`);
      }
    } catch (err) {
      await this.destroy(instance).catch(() => {});
      throw safeError(err, this.secrets);
    }
  }

  /** MariaDB keeps one connection beyond `max_connections` for its admin: all of them are for logins. */
  async maxConnections(): Promise<number> {
    const [row] = await this.sql<{ n: number | string }[]>('select @@max_connections as n');
    return Number(row!.n);
  }

  /**
   * MariaDB's system schemas (`mysql`, `performance_schema`, `sys`) are closed to a user holding privileges on its
   * own database only, and `SHOW DATABASES` shows it only that one (docs/security.md, "Tenants of the database
   * servers"): nothing to change, but what would open them to every user is reported (a grant to PUBLIC or to the
   * anonymous user, `SHOW DATABASES` for everyone).
   */
  async prepare(): Promise<string[]> {
    const problems: string[] = [];
    const open = await this.sql<{ User: string; Db: string }[]>(
      "select User, Db from mysql.db where User in ('', 'PUBLIC') union select User, '*' from mysql.user where User in ('', 'PUBLIC') and Select_priv = 'Y'",
    ).catch(() => []);
    if (open.length) {
      problems.push(
        `the server grants to every user (${open.map((r) => `${r.User || "''"} on ${r.Db}`).join(', ')}): tenants can use it`,
      );
    }
    const [show] = await this.sql<{ v: number | string }[]>('select @@skip_show_database as v').catch(
      () => [],
    );
    if (show && Number(show.v) === 0) {
      const broad = await this.sql<unknown[]>(
        "select 1 from mysql.user where User in ('', 'PUBLIC') and Show_db_priv = 'Y'",
      ).catch(() => []);
      if (broad.length) problems.push('SHOW DATABASES is granted to every user');
    }
    return problems;
  }

  async applySize(instance: DatabaseInstance, maxConnections: number): Promise<void> {
    const user = `${ident(instance.dbUser).replace(/`/g, "'")}@'%'`;
    await this.sql(`alter user ${user} with max_user_connections ${Math.trunc(maxConnections)}`);
  }

  async setVerifier(instance: DatabaseInstance, verifier: string): Promise<void> {
    const user = `${ident(instance.dbUser).replace(/`/g, "'")}@'%'`;
    await this.sql(`alter user ${user} identified by password ?`, [verifier]);
    await this.killSessions(instance.dbUser);
  }

  async dump(instance: DatabaseInstance, store: BackupStore, backupId: string): Promise<number> {
    assertName(instance.dbName);
    return this.withOptions((options) =>
      dumpInto(
        store,
        backupId,
        'mariadb-dump',
        [
          `--defaults-extra-file=${options}`,
          '--single-transaction',
          ...dumpBoundArgs('mysql'),
          '--routines',
          '--triggers',
          '--events',
          instance.dbName,
        ],
        {
          env: {},
          secrets: this.secrets,
          // mariadb-dump (and mysqldump) end a dump they finished with this comment.
          checkOutput: ({ tail }) =>
            tail.toString('latin1').includes('-- Dump completed') ? null : 'not a whole dump',
        },
      ),
    );
  }

  async destroy(instance: DatabaseInstance): Promise<void> {
    const user = `${ident(instance.dbUser).replace(/`/g, "'")}@'%'`;
    await this.sql(`drop user if exists ${user}`);
    await this.killSessions(instance.dbUser);
    await this.sql(`drop database if exists ${ident(instance.dbName)}`);
  }

  async load(instance: DatabaseInstance) {
    assertName(instance.dbName);
    const exists = await this.sql<unknown[]>(
      'select 1 from information_schema.SCHEMATA where SCHEMA_NAME = ?',
      [instance.dbName],
    );
    if (!exists.length) return null;
    const [row] = await this.sql<{ sessions: number; busy: number; bytes: string | number | null }[]>(
      `select (select count(*) from information_schema.PROCESSLIST where USER = ?) as sessions,
              (select count(*) from information_schema.PROCESSLIST where USER = ? and COMMAND <> 'Sleep') as busy,
              (select coalesce(sum(DATA_LENGTH + INDEX_LENGTH), 0) from information_schema.TABLES
                where TABLE_SCHEMA = ?) as bytes`,
      [instance.dbUser, instance.dbUser, instance.dbName],
    );
    return {
      sessions: Number(row?.sessions ?? 0),
      busy: Number(row?.busy ?? 0),
      bytes: Number(row?.bytes ?? 0),
    };
  }

  /**
   * MariaDB has no read-only database: the user keeps only SELECT and SHOW VIEW on it (and its sessions end); it
   * holds no GRANT OPTION, so it cannot give itself more, and its routines, events and views run with those rights.
   * Nothing happens when the privileges are already those (one read): the check runs at every sweep.
   */
  async setReadOnly(instance: DatabaseInstance, readOnly: boolean): Promise<void> {
    const db = ident(instance.dbName);
    const user = `${ident(instance.dbUser).replace(/`/g, "'")}@'%'`;
    const [row] = await this.sql<Record<string, string>[]>(
      "select * from mysql.db where Db = ? and User = ? and Host = '%'",
      [instance.dbName, instance.dbUser],
    );
    const held = Object.entries(row ?? {}).filter(([k, v]) => k.endsWith('_priv') && v === 'Y');
    const onlyReads = held.every(([k]) => k === 'Select_priv' || k === 'Show_view_priv');
    if (readOnly ? onlyReads && held.length > 0 : !onlyReads) return;
    if (readOnly) {
      await this.sql(`revoke all privileges on ${db}.* from ${user}`);
      await this.sql(`grant select, show view on ${db}.* to ${user}`);
    } else {
      await this.sql(`grant all privileges on ${db}.* to ${user}`);
    }
    await this.killSessions(instance.dbUser);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** The longest start of a line `DefinerRewrite` rewrites, up to the end of the definer. */
const DEFINER_PREFIX_MAX = 128;
/**
 * mariadb-dump's own DEFINER clauses, at the start of a line: routines (`CREATE DEFINER=…`), triggers and events
 * (`/*!50003 CREATE*\/ /*!50017 DEFINER=…`, `/*!50106 CREATE*\/ /*!50117 DEFINER=…`) and views
 * (`/*!50013 DEFINER=…`), naming a database's own user.
 */
const DUMP_DEFINER =
  /(^|\n)(CREATE |\/\*!50003 CREATE\*\/ \/\*!50017 |\/\*!50013 |\/\*!50106 CREATE\*\/ \/\*!50117 )DEFINER=`cdb_[a-z0-9]{1,59}`@`%`/g;

/**
 * A dump on its way to a restore, with the DEFINER of every routine, trigger, view and event mariadb-dump wrote made
 * `CURRENT_USER` (docs/databases.md, "Real servers in short"): the source database's user, whom a user without SUPER
 * cannot name, becomes the new database's own. Only those clauses at the start of a line change; the bytes go through
 * as they are (read as latin1, which maps each byte to one character and back).
 */
export class DefinerRewrite extends Transform {
  /** The start of the last line read, while too short to tell. */
  private held = '';
  /** Whether what follows `held` (or the next chunk, when nothing is held) starts a line. */
  private lineStart = true;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const text = this.held + chunk.toString('latin1');
    const startsLine = this.lineStart;
    const lastLine = text.lastIndexOf('\n') + 1;
    const open = lastLine > 0 || startsLine;
    const cut = open && text.length - lastLine < DEFINER_PREFIX_MAX ? lastLine : text.length;
    this.held = text.slice(cut);
    this.lineStart = this.held !== '' || text.endsWith('\n');
    if (cut > 0) this.push(Buffer.from(rewriteDefiners(text.slice(0, cut), startsLine), 'latin1'));
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.held) this.push(Buffer.from(rewriteDefiners(this.held, true), 'latin1'));
    done();
  }
}

function rewriteDefiners(text: string, startsLine: boolean): string {
  if (!text.includes('DEFINER=')) return text;
  return text.replace(DUMP_DEFINER, (match, newline: string, head: string, offset: number) =>
    offset === 0 && newline === '' && !startsLine ? match : `${newline}${head}DEFINER=CURRENT_USER`,
  );
}
