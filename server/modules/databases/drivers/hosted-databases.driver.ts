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

  constructor(
    hosts: readonly DatabaseHost[],
    readonly store: BackupStore,
    private readonly log: Logger,
  ) {
    const unknown = hosts.filter((h) => !(DATABASE_REGIONS as readonly string[]).includes(h.region));
    if (unknown.length) {
      throw new Error(`DATABASE_HOSTS: unknown region ${unknown.map((h) => h.region).join(', ')}`);
    }
    for (const host of hosts) {
      const server = host.engine === 'postgresql' ? new PostgresServer(host) : new MysqlServer(host);
      this.servers.set(host.key, { host, server });
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
    // The dump's checksum is read while the server restores it (one pass over the file in the time of the restore,
    // rather than a full read before it); the database opens only if it matches.
    const restore = opts.fromBackupId ? await this.store.open(opts.fromBackupId) : null;
    restore?.verified.catch(() => {});
    await server.create(instance, {
      verifier: opts.verifier,
      restore,
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
