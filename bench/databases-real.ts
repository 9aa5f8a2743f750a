import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { recreatePostgresDatabase, upgradeAllToEnterprise } from './lib/database.js';
import type { BenchContext } from './lib/plugin.js';
import {
  developmentServerEnv,
  freePort,
  restCaller,
  SERVER_SCRIPT,
  startServerProcess,
  type ServerHandle,
} from './lib/processes.js';
import { median } from './lib/stats.js';

/**
 * Real databases (docs/databases.md, "Databases", Real servers) on the PostgreSQL of this machine: the time from a create to
 * the first successful connection with the returned string; a backup of a database of about 100 MB against
 * `pg_dump` of it alone (same format and compression), and its restore into a new database against `pg_restore`
 * alone. The server under test here is one of its own with DATABASE_HOSTS (so that no process without that
 * configuration takes its jobs), on a PostgreSQL database of its own (`<bench database>_real_db`), as a deployment
 * that manages database servers runs. On the embedded PGlite (`BENCH_REAL_DB_API=pglite`) the API's own queries run
 * on the event loop that also drains the dump tool's output, and a client polling the backup slows the dump down.
 */
const API_ON_PGLITE = process.env.BENCH_REAL_DB_API === 'pglite';
const ADMIN = process.env.BENCH_PG_ADMIN ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const OWNER = { email: 'real-db-bench@example.com', password: 'real-db-bench-password' };
const ROWS = Number(process.env.BENCH_REAL_DB_ROWS ?? 330_000);

async function admin<T extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: ADMIN });
  await c.connect();
  try {
    return (await c.query<T>(text, params)).rows;
  } finally {
    await c.end();
  }
}

async function timed(command: string, args: string[], env: Record<string, string> = {}): Promise<number> {
  const url = new URL(ADMIN);
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, {
      env: {
        PATH: process.env.PATH ?? '',
        PGHOST: url.hostname,
        PGPORT: url.port || '5432',
        PGUSER: url.username,
        ...env,
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${command} exited with ${code}`)),
    );
  });
  return performance.now() - started;
}

export async function bench(ctx: BenchContext): Promise<void> {
  const { report } = ctx;
  report.section('Real databases (PostgreSQL on this machine)');
  const dir = mkdtempSync(join(tmpdir(), 'bench-real-db-'));
  const names: string[] = [];
  let server: ServerHandle | undefined;
  const apiUrl = new URL(ctx.databaseUrl);
  apiUrl.pathname = `/${decodeURIComponent(apiUrl.pathname.slice(1))}_real_db`;
  if (!API_ON_PGLITE) await recreatePostgresDatabase(apiUrl.href);
  const env = async () => {
    const port = await freePort();
    return {
      port,
      env: developmentServerEnv(port, {
        DATA_DIR: dir,
        JWT_SECRET: ctx.jwtSecret,
        BCRYPT_COST: '4',
        OWNER_EMAIL: OWNER.email,
        OWNER_PASSWORD: OWNER.password,
        DATABASE_HOSTS: `postgresql@us-east=${ADMIN}`,
        BACKUP_DIR: join(dir, 'backups'),
        DATABASE_DELETION_GRACE: '0s',
        // This machine's PostgreSQL (max_connections 100) holds the bench's two databases beside the test suite's.
        DATABASE_SERVER_MAX_CONNECTIONS: '100000',
        ...(API_ON_PGLITE ? {} : { DATABASE_URL: apiUrl.href }),
      }),
    };
  };
  const start = async (name: string) => {
    const { port, env: e } = await env();
    return startServerProcess({ name, script: SERVER_SCRIPT, port, env: e, healthPath: '/readyz' });
  };
  try {
    await (await start('real databases (first start)')).stop();
    await upgradeAllToEnterprise(
      API_ON_PGLITE ? { kind: 'pglite', dir: join(dir, 'pglite') } : { kind: 'postgresql', url: apiUrl.href },
    );
    server = await start('real databases');
    const call = restCaller(server.baseUrl);
    const login = await call<{ token?: string }>('POST', '/v1/auth/login', OWNER);
    const token = login.body.token;
    if (!token) throw new Error(`login answered ${login.status}`);
    type Db = { id: string; connection_string: string; connection_info: { database: string } };
    const create = async (body: Record<string, unknown>) => {
      const res = await call<{ database: Db }>(
        'POST',
        '/v1/databases',
        { engine: 'postgresql', backup_enabled: false, ...body },
        token,
      );
      if (res.status !== 201) throw new Error(`create answered ${res.status}: ${JSON.stringify(res.body)}`);
      names.push(res.body.database.connection_info.database);
      return res.body.database;
    };
    const firstConnection = async (url: string) => {
      for (;;) {
        const c = new pg.Client({ connectionString: url });
        c.on('error', () => {});
        try {
          await c.connect();
          await c.end();
          return;
        } catch {
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    // A client that polls competes with the dump for this machine's two cores (the API answers each poll, pg_dump
    // and its server backend take a core each): the wait for a backup or a restore polls every 10 ms only once
    // most of the time the tool alone took has passed (`quietMs`), as a client that knows its database would.
    const waitFor = async (check: () => Promise<boolean>, quietMs = 0) => {
      if (quietMs > 0) await new Promise((r) => setTimeout(r, quietMs));
      while (!(await check())) await new Promise((r) => setTimeout(r, 10));
    };

    let t = performance.now();
    const d = await create({ name: `bench-real-${Date.now().toString(36)}` });
    await firstConnection(d.connection_string);
    report.figure('create → first successful connection', performance.now() - t, 'ms', {
      target: '< 2,000 ms',
      met: performance.now() - t < 2000,
    });

    const c = new pg.Client({ connectionString: d.connection_string });
    await c.connect();
    await c.query(
      `create table big as select g as id, md5(g::text) || repeat('x', 200) as body from generate_series(1, ${ROWS}) g`,
    );
    // A table just written has its rows' hint bits still to set: the first read of it writes every page. VACUUM
    // sets them (as autovacuum would soon), so that the dump through the API and pg_dump alone read the same table.
    await c.query('vacuum analyze big');
    await c.end();
    const [size] = await admin<{ bytes: string }>('select pg_database_size($1)::bigint as bytes', [
      d.connection_info.database,
    ]);
    report.figure('  database size', Number(size!.bytes) / 1e6, 'MB');

    const dumpArgs = [
      '--format=custom',
      '--compress=1',
      '--file',
      join(dir, 'alone.dump'),
      d.connection_info.database,
    ];
    // Three rounds, each pg_dump alone then a backup through the API (medians): one of each swings by a third
    // from run to run on a shared 2-core machine.
    const alone: number[] = [];
    const through: number[] = [];
    let backupId = '';
    const recorded: number[] = [];
    for (let round = 0; round < 3; round++) {
      const dumpAloneMs = await timed('pg_dump', dumpArgs);
      alone.push(dumpAloneMs);
      t = performance.now();
      const posted = await call<{ backup: { id: string } }>(
        'POST',
        `/v1/databases/${d.id}/backups`,
        {},
        token,
      );
      backupId = posted.body.backup.id;
      await waitFor(async () => {
        const list = await call<{
          backups: { id: string; status: string; created_at: string; completed_at: string | null }[];
        }>('GET', `/v1/databases/${d.id}/backups`, undefined, token);
        const b = list.body.backups.find((x) => x.id === backupId);
        if (b?.status === 'failed') throw new Error('the backup failed');
        if (b?.status !== 'completed') return false;
        recorded.push(Date.parse(b.completed_at!) - Date.parse(b.created_at));
        return true;
      }, 0.8 * dumpAloneMs);
      through.push(performance.now() - t);
    }
    const backupMs = median(through);
    const dumpMs = median(alone);
    report.figure('backup through the API (POST → completed)', backupMs, 'ms', {
      target: `≤ ${Math.round(1.2 * dumpMs)} ms (1.2 × pg_dump alone)`,
      met: backupMs <= 1.2 * dumpMs,
    });
    report.figure('  pg_dump alone', dumpMs, 'ms');
    report.figure('  as the API records it (created_at → completed_at)', median(recorded), 'ms');

    const scratch = `bench_restore_alone_${process.pid}`;
    const restoreAlone = async () => {
      await admin(`drop database if exists ${scratch} with (force)`);
      await admin(`create database ${scratch}`);
      const ms = await timed('pg_restore', [
        '--no-owner',
        '--no-acl',
        '--dbname',
        scratch,
        join(dir, 'alone.dump'),
      ]);
      await admin(`drop database if exists ${scratch} with (force)`);
      return ms;
    };
    // Three rounds, each pg_restore alone then a restore through the API (medians).
    const restoredAlone: number[] = [];
    const restored: number[] = [];
    for (let round = 0; round < 3; round++) {
      const restoreAloneMs = await restoreAlone();
      restoredAlone.push(restoreAloneMs);
      t = performance.now();
      const copy = await create({
        name: `bench-restore-${round}-${Date.now().toString(36)}`,
        backup_id: backupId,
      });
      await waitFor(async () => {
        const res = await call<{ database: { status: string } }>(
          'GET',
          `/v1/databases/${copy.id}`,
          undefined,
          token,
        );
        if (res.body.database.status === 'failed') throw new Error('the restore failed');
        return res.body.database.status === 'running';
      }, 0.8 * restoreAloneMs);
      restored.push(performance.now() - t);
    }
    const restoreMs = median(restored);
    const aloneMs = median(restoredAlone);
    report.figure('restore through the API (create with backup_id → running)', restoreMs, 'ms', {
      target: `≤ ${Math.round(1.2 * aloneMs)} ms (1.2 × pg_restore alone)`,
      met: restoreMs <= 1.2 * aloneMs,
    });
    report.figure('  pg_restore alone (into an empty database)', aloneMs, 'ms');
  } finally {
    await server?.stop();
    for (const name of names) {
      await admin(`drop database if exists "${name}" with (force)`).catch(() => {});
      await admin(`drop role if exists "${name}"`).catch(() => {});
    }
    rmSync(dir, { recursive: true, force: true });
  }
}
