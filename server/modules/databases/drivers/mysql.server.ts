import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import type { DatabaseInstance } from '../databases.driver.js';
import type { DatabaseHost } from '../../../lib/database-hosts.js';
import type { BackupStore } from './backup-store.js';
import {
  assertName,
  dumpInto,
  restoreMismatch,
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

  /** Runs a client tool with `[client]` options in a 0600 file removed afterwards. */
  private async withOptions<T>(run: (file: string) => Promise<T>): Promise<T> {
    const dir = await mkdtemp(join(tmpdir(), 'cloud-mysql-'));
    const file = join(dir, 'client.cnf');
    const quote = (v: string) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
    const lines = [
      '[client]',
      `host=${quote(this.host.host)}`,
      `port=${this.host.port}`,
      `user=${quote(decodeURIComponent(this.url.username || 'root'))}`,
    ];
    if (this.url.password) lines.push(`password=${quote(decodeURIComponent(this.url.password))}`);
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
      if (await this.userExists(instance.dbUser)) {
        await this.sql(`alter user ${user} identified by password ? with max_user_connections ${limit}`, [
          verifier,
        ]);
      } else {
        await this.sql(`create user ${user} identified by password ? with max_user_connections ${limit}`, [
          verifier,
        ]);
      }
      await this.sql(`create database ${db} character set utf8mb4 collate utf8mb4_unicode_ci`);
      if (restore) {
        await this.withOptions((options) =>
          runTool('mariadb', [`--defaults-extra-file=${options}`, '--batch', instance.dbName], {
            env: {},
            secrets: this.secrets,
            stdinFile: restore.file,
          }),
        );
        await restore.verified;
      }
      // The user can log in only once everything is in place.
      await this.sql(`grant all privileges on ${db}.* to ${user}`);
    } catch (err) {
      await this.destroy(instance).catch(() => {});
      // A dump that does not match its checksum makes the restore fail too: say why.
      throw safeError((await restoreMismatch(restore)) ?? err, this.secrets);
    }
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

  /** MariaDB has no read-only database: the user keeps only SELECT on it (and its sessions end). */
  async setReadOnly(instance: DatabaseInstance, readOnly: boolean): Promise<void> {
    const db = ident(instance.dbName);
    const user = `${ident(instance.dbUser).replace(/`/g, "'")}@'%'`;
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
