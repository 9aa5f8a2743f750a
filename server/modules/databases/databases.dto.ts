import { iso } from '../../lib/time.js';
import {
  ENGINE_PORTS,
  ENGINE_URLS,
  MASKED_PASSWORD,
  SIZE_SPECS,
  type DatabaseEngine,
  type DatabaseRegion,
  type DatabaseSize,
  type DatabaseStatus,
} from './databases.constants.js';
import type { DatabaseDriver, DatabaseInstance, InstanceMetrics } from './databases.driver.js';
import type { DatabaseBackup } from './database-backup.entity.js';
import type { TBackup, TDatabase, TDatabaseDetail } from './databases.schema.js';

/** What the views need of a database: the entity, or a row of the list query (databases.repository.ts). */
export interface DatabaseView {
  id: string;
  name: string;
  engine: DatabaseEngine;
  version: string;
  status: DatabaseStatus;
  region: DatabaseRegion;
  size: DatabaseSize;
  host: string;
  port?: number | null;
  server?: string | null;
  sslRequired?: boolean;
  readOnly?: boolean;
  statusReason?: string | null;
  dbName: string;
  dbUser: string;
  multiAz: boolean;
  backupEnabled: boolean;
  backupRetention: number;
  user: { id: string };
  createdAt: Date;
  updatedAt: Date;
  lastBackupAt?: Date | null;
  nextBackupAt?: Date | null;
  deletionScheduledAt?: Date | null;
  restoredFromBackupId?: string | null;
}

export function instanceOf(d: DatabaseView): DatabaseInstance {
  return {
    id: d.id,
    name: d.name,
    engine: d.engine,
    version: d.version,
    size: d.size,
    region: d.region,
    host: d.host,
    port: d.port ?? ENGINE_PORTS[d.engine],
    dbName: d.dbName,
    dbUser: d.dbUser,
    server: d.server ?? null,
    multiAz: d.multiAz,
  };
}

const IDLE: InstanceMetrics = { cpuUsage: 0, memoryUsage: 0, storageUsage: 0, activeConnections: 0 };

/** The load shown: the driver's while the instance serves (`running`, `resizing`), nothing otherwise. */
export async function metricsOf(
  d: DatabaseView,
  driver: DatabaseDriver,
  now: Date,
): Promise<InstanceMetrics> {
  return d.status === 'running' || d.status === 'resizing' ? driver.metrics(instanceOf(d), now) : IDLE;
}

/** The engine's URL; the password in clear only when given (create and reset-password), `****` otherwise. */
export function connectionString(d: DatabaseView, password?: string): string {
  const { scheme, tls } = ENGINE_URLS[d.engine];
  const port = d.port ?? ENGINE_PORTS[d.engine];
  const host = d.host.includes(':') ? `[${d.host}]` : d.host;
  const query = d.sslRequired === false ? '' : `?${tls}`;
  return `${scheme}://${d.dbUser}:${password ?? MASKED_PASSWORD}@${host}:${port}/${d.dbName}${query}`;
}

/** The list view, with the load `m` (metricsOf). */
export function toDatabaseDto(d: DatabaseView, m: InstanceMetrics): TDatabase {
  return {
    id: d.id,
    name: d.name,
    engine: d.engine,
    version: d.version as TDatabase['version'],
    status: d.status,
    region: d.region,
    size: d.size,
    storage: SIZE_SPECS[d.size].storage,
    connection_string: connectionString(d),
    metrics: { cpu_usage: m.cpuUsage, memory_usage: m.memoryUsage, storage_usage: m.storageUsage },
    backup_enabled: d.backupEnabled,
    multi_az: d.multiAz,
    backup_retention: d.backupRetention,
    user_id: d.user.id,
    created_at: iso(d.createdAt)!,
    updated_at: iso(d.updatedAt)!,
    last_backup: iso(d.lastBackupAt),
    next_backup: iso(d.nextBackupAt),
    deletion_scheduled: d.status === 'deleting' ? iso(d.deletionScheduledAt) : null,
  };
}

/**
 * The detail view (also the payload of the `database.*` events). `password` only in the responses that hand out a
 * new one (create, reset-password): then `connection_string` and `connection_info.password` carry it.
 */
export function toDatabaseDetailDto(d: DatabaseView, m: InstanceMetrics, password?: string): TDatabaseDetail {
  const spec = SIZE_SPECS[d.size];
  const base = toDatabaseDto(d, m);
  return {
    ...base,
    connection_string: connectionString(d, password),
    metrics: {
      cpu_usage: m.cpuUsage,
      memory_usage: m.memoryUsage,
      storage_usage: m.storageUsage,
      connections: { active: m.activeConnections, max: spec.maxConnections },
    },
    connection_info: {
      host: d.host,
      port: d.port ?? ENGINE_PORTS[d.engine],
      database: d.dbName,
      user: d.dbUser,
      ...(password !== undefined ? { password } : {}),
      ssl_required: d.sslRequired ?? true,
      simulated: !d.server,
    },
    specs: {
      vcpus: spec.vcpus,
      memory: spec.memory,
      storage: spec.storage,
      monthly_price: spec.monthlyPriceCents / 100,
    },
    restored_from_backup_id: d.restoredFromBackupId ?? null,
    read_only: d.readOnly ?? false,
    status_reason: d.statusReason ?? null,
  };
}

/** `1.2 GB`, `850 MB`, `12 KB` (decimal units, as disk sizes are sold). */
export function humanBytes(bytes: number): string {
  const units: [number, string][] = [
    [1e12, 'TB'],
    [1e9, 'GB'],
    [1e6, 'MB'],
    [1e3, 'KB'],
  ];
  for (const [factor, unit] of units) {
    if (bytes >= factor) {
      const v = bytes / factor;
      return `${v >= 100 ? Math.round(v) : Math.round(v * 10) / 10} ${unit}`;
    }
  }
  return `${bytes} B`;
}

export function toBackupDto(
  b: DatabaseBackup,
  database: { engine: DatabaseEngine; version: string },
): TBackup {
  const bytes = b.sizeBytes ?? null;
  return {
    id: b.id,
    database_id: b.database.id,
    name: b.name,
    description: b.description ?? null,
    type: b.type,
    status: b.status,
    failure_reason: b.failureReason ?? null,
    size: bytes === null ? null : humanBytes(bytes),
    size_bytes: bytes,
    engine: database.engine,
    version: database.version as TBackup['version'],
    created_at: iso(b.createdAt)!,
    completed_at: iso(b.completedAt),
    expires_at: iso(b.expiresAt),
  };
}
