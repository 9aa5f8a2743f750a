import { randomBytes } from 'node:crypto';
import type { Logger } from '../../../kit/deps.js';
import {
  DATABASE_REGIONS,
  SIZE_SPECS,
  type DatabaseEngine,
  type DatabaseRegion,
  type DatabaseSize,
} from '../databases.constants.js';
import type {
  DatabaseDriver,
  DatabaseInstance,
  DriverOperation,
  InstanceMetrics,
  Placement,
} from '../databases.driver.js';
import type { DatabaseHost } from '../../../lib/database-hosts.js';
import type { BackupStore } from './backup-store.js';
import { mysqlNativeHash, realName, scramVerifier, type EngineServer } from './engine-server.js';
import { MysqlServer } from './mysql.server.js';
import { PostgresServer } from './postgres.server.js';

const NOW: DriverOperation = { readyInMs: 0 };
const IDLE: InstanceMetrics = { cpuUsage: 0, memoryUsage: 0, storageUsage: 0, activeConnections: 0 };
/** A server's `max_connections` is read again after this long. */
const MAX_CONNECTIONS_TTL_MS = 5 * 60_000;

/** `promise`, or a rejection after `ms`. */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('the server did not answer in time')), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** Metrics are read from the server at most this often per database (every view reads them). */
const METRICS_TTL_MS = 5_000;

/**
 * Real databases on the servers of `DATABASE_HOSTS` (docs/databases.md, "Databases", Real servers): PostgreSQL
 * (postgres.server.ts) and MariaDB/MySQL (mysql.server.ts); MongoDB has none. Every change is carried out by the
 * durable job that follows it (`readyInMs: 0`), so a server that is down is retried with backoff. Dumps go to the
 * backup store.
 */
export class HostedDatabaseDriver implements DatabaseDriver {
  private readonly servers = new Map<string, { host: DatabaseHost; server: EngineServer }>();
  private readonly cache = new Map<string, { at: number; metrics: InstanceMetrics }>();

  /** `max_connections` of each server as last read, and when. */
  private readonly maxConnections = new Map<string, { at: number; value: number }>();

  constructor(
    hosts: readonly DatabaseHost[],
    readonly store: BackupStore,
    private readonly log: Logger,
    private readonly capacity: { reserve: number; maxConnections: number | undefined } = {
      reserve: 10,
      maxConnections: undefined,
    },
  ) {
    const unknown = hosts.filter((h) => !(DATABASE_REGIONS as readonly string[]).includes(h.region));
    if (unknown.length) {
      throw new Error(`DATABASE_HOSTS: unknown region ${unknown.map((h) => h.region).join(', ')}`);
    }
    for (const host of hosts) {
      const server = host.engine === 'postgresql' ? new PostgresServer(host) : new MysqlServer(host);
      this.servers.set(host.key, { host, server });
    }
    // Checked at start (and, for PostgreSQL, again before its first create): a server whose system databases are
    // open to tenants is said in the log.
    for (const { host, server } of this.servers.values()) {
      server.prepare().then(
        (problems) => {
          for (const problem of problems) this.log.warn({ server: host.key }, `database server: ${problem}`);
        },
        (err: unknown) =>
          this.log.warn(
            { server: host.key, err: (err as Error).message },
            'database server not prepared yet',
          ),
      );
    }
  }

  private serverOf(instance: DatabaseInstance): EngineServer {
    const found = instance.server ? this.servers.get(instance.server) : undefined;
    // A server taken out of DATABASE_HOSTS while databases still live on it: they cannot be managed.
    if (!found) throw new Error(`database server ${instance.server ?? '(none)'} is not configured`);
    return found.server;
  }

  placements(spec: { id: string; engine: DatabaseEngine; region: DatabaseRegion }): Placement[] {
    const name = realName(spec.id);
    return [...this.servers.values()]
      .filter(({ host }) => host.engine === spec.engine && host.region === spec.region && !host.drain)
      .map(({ host }) => ({
        server: host.key,
        host: host.host,
        port: host.port,
        dbName: name,
        dbUser: name,
      }));
  }

  /**
   * The connections `server` gives its tenants' databases (docs/databases.md, "Capacity of a server"): what it
   * accepts from logins that are not superusers (`max_connections`, read at most every 5 minutes, or
   * `DATABASE_SERVER_MAX_CONNECTIONS`), less `DATABASE_CONNECTION_RESERVE`. A server that has never answered counts
   * with its engine's default `max_connections` (PostgreSQL 100, less its 3 reserved; MariaDB 151) until it does.
   */
  async connectionCapacity(server: string): Promise<number | null> {
    const found = this.servers.get(server);
    if (!found) return null;
    let max = this.capacity.maxConnections;
    if (max === undefined) {
      const known = this.maxConnections.get(server);
      if (known && Date.now() - known.at < MAX_CONNECTIONS_TTL_MS) max = known.value;
      else {
        try {
          const value = await withTimeout(found.server.maxConnections(), 3000);
          this.maxConnections.set(server, { at: Date.now(), value });
          max = value;
        } catch (err) {
          this.log.warn({ server, err: (err as Error).message }, 'database server capacity not read');
          max = known?.value ?? (found.host.engine === 'postgresql' ? 97 : 151);
        }
      }
    }
    return Math.max(0, max - this.capacity.reserve);
  }

  passwordVerifier(engine: DatabaseEngine, password: string): string | null {
    if (engine === 'postgresql') return scramVerifier(password);
    if (engine === 'mysql') return mysqlNativeHash(password);
    return null;
  }

  async provision(): Promise<DriverOperation> {
    return NOW;
  }

  async create(
    instance: DatabaseInstance,
    opts: { fromBackupId?: string | null | undefined; verifier: string | null },
  ): Promise<void> {
    if (!opts.verifier) throw new Error('no credentials to create the database with');
    const server = this.serverOf(instance);
    // Nothing of a dump runs before its checksum matched (docs/security.md, "Tenants of the database servers").
    const dump = opts.fromBackupId ? await this.store.open(opts.fromBackupId) : null;
    if (dump) await dump.verified;
    await server.create(instance, {
      verifier: opts.verifier,
      restore: dump ? { file: dump.file } : null,
      maxConnections: SIZE_SPECS[instance.size].maxConnections,
    });
  }

  async resize(): Promise<DriverOperation> {
    return NOW;
  }

  async applySize(instance: DatabaseInstance): Promise<void> {
    await this.serverOf(instance).applySize(instance, SIZE_SPECS[instance.size].maxConnections);
  }

  async setPassword(instance: DatabaseInstance, password: string): Promise<void> {
    const verifier = this.passwordVerifier(instance.engine, password);
    if (!verifier) throw new Error(`no driver for ${instance.engine}`);
    await this.serverOf(instance).setVerifier(instance, verifier);
  }

  /**
   * A password nobody knows (the API keeps none of it) and, on PostgreSQL, a connection limit of 0; setting the
   * password ends the login's sessions.
   */
  async disableLogin(instance: DatabaseInstance): Promise<void> {
    const server = this.serverOf(instance);
    if (instance.engine === 'postgresql') await server.applySize(instance, 0);
    const verifier = this.passwordVerifier(instance.engine, randomBytes(32).toString('base64url'));
    if (verifier) await server.setVerifier(instance, verifier);
  }

  async startBackup(): Promise<DriverOperation> {
    return NOW;
  }

  async runBackup(instance: DatabaseInstance, backupId: string): Promise<number> {
    return this.serverOf(instance).dump(instance, this.store, backupId);
  }

  async deleteBackup(backupId: string): Promise<void> {
    await this.store.delete(backupId);
  }

  async destroy(instance: DatabaseInstance): Promise<void> {
    await this.serverOf(instance).destroy(instance);
    this.cache.delete(instance.id);
  }

  /**
   * Read from the server (cached 5 s): `connections.active` its sessions; `storage_usage` its size against the
   * storage of its size; `cpu_usage` its sessions running a statement per vCPU of its size; `memory_usage` its
   * sessions against its connection limit (each session holds the server's per-connection memory). A server that
   * does not answer shows the last figures read (zeros at first) rather than failing the view.
   */
  async metrics(instance: DatabaseInstance, at: Date): Promise<InstanceMetrics> {
    const cached = this.cache.get(instance.id);
    if (cached && Math.abs(at.getTime() - cached.at) < METRICS_TTL_MS) return cached.metrics;
    let metrics = cached?.metrics ?? IDLE;
    try {
      const load = await this.serverOf(instance).load(instance);
      if (load) metrics = figures(instance.size, load);
    } catch (err) {
      this.log.warn(
        { database_id: instance.id, err: (err as Error).message },
        'database metrics unavailable',
      );
    }
    if (this.cache.size >= 10_000) this.cache.clear();
    this.cache.set(instance.id, { at: at.getTime(), metrics });
    return metrics;
  }

  async storageBytes(instance: DatabaseInstance): Promise<number | null> {
    const load = await this.serverOf(instance).load(instance);
    return load ? load.bytes : null;
  }

  async setReadOnly(instance: DatabaseInstance, readOnly: boolean): Promise<void> {
    await this.serverOf(instance).setReadOnly(instance, readOnly);
  }

  async close(): Promise<void> {
    await Promise.all([...this.servers.values()].map(({ server }) => server.close().catch(() => {})));
  }
}

function figures(
  size: DatabaseSize,
  load: { sessions: number; busy: number; bytes: number },
): InstanceMetrics {
  const spec = SIZE_SPECS[size];
  const pct = (v: number) => Math.min(100, Math.max(0, Math.round(v)));
  return {
    cpuUsage: pct((100 * load.busy) / spec.vcpus),
    memoryUsage: pct((100 * load.sessions) / spec.maxConnections),
    storageUsage: pct((100 * load.bytes) / (spec.storageGb * 1e9)),
    activeConnections: Math.min(spec.maxConnections, load.sessions),
  };
}
