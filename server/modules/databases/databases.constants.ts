import type { PlanId } from '../../lib/plans.js';
import { REGIONS, type Region } from '../../lib/regions.js';
/** The fixed values of managed databases (docs/databases.md, "Databases"). */

export const DATABASE_ENGINES = ['postgresql', 'mysql', 'mongodb'] as const;
export type DatabaseEngine = (typeof DATABASE_ENGINES)[number];

/** The versions each engine offers, oldest first, and the one a create without `version` gets. */
export const ENGINE_VERSIONS = {
  postgresql: ['14', '15', '16', '17'],
  mysql: ['8.0', '8.4'],
  mongodb: ['6.0', '7.0'],
} as const satisfies Record<DatabaseEngine, readonly string[]>;
export const DEFAULT_VERSIONS: Record<DatabaseEngine, string> = {
  postgresql: '16',
  mysql: '8.4',
  mongodb: '7.0',
};
/** Every version of every engine: the `version` enum of the API. */
export const DATABASE_VERSIONS = [
  ...ENGINE_VERSIONS.postgresql,
  ...ENGINE_VERSIONS.mysql,
  ...ENGINE_VERSIONS.mongodb,
] as const;
export type DatabaseVersion = (typeof DATABASE_VERSIONS)[number];

export function isVersionOf(engine: DatabaseEngine, version: string): boolean {
  return (ENGINE_VERSIONS[engine] as readonly string[]).includes(version);
}

/** Where a database runs: the platform's region codes. */
export const DATABASE_REGIONS = REGIONS;
export type DatabaseRegion = Region;

export const DATABASE_SIZES = ['small', 'medium', 'large', 'xl'] as const;
export type DatabaseSize = (typeof DATABASE_SIZES)[number];

export interface SizeSpec {
  vcpus: number;
  memoryGb: number;
  /** Storage in GB (1 TB = 1,000 GB). */
  storageGb: number;
  /** As the API shows it. */
  storage: string;
  memory: string;
  /** Monthly price in cents (USD). */
  monthlyPriceCents: number;
  /** `connections.max`. */
  maxConnections: number;
}

/** Size constants of the contract: vCPUs, memory, SSD storage, monthly price, connection limit. */
export const SIZE_SPECS: Record<DatabaseSize, SizeSpec> = {
  small: {
    vcpus: 1,
    memoryGb: 2,
    storageGb: 20,
    storage: '20 GB',
    memory: '2 GB',
    monthlyPriceCents: 2900,
    maxConnections: 50,
  },
  medium: {
    vcpus: 2,
    memoryGb: 4,
    storageGb: 100,
    storage: '100 GB',
    memory: '4 GB',
    monthlyPriceCents: 8900,
    maxConnections: 100,
  },
  large: {
    vcpus: 4,
    memoryGb: 8,
    storageGb: 500,
    storage: '500 GB',
    memory: '8 GB',
    monthlyPriceCents: 19900,
    maxConnections: 200,
  },
  xl: {
    vcpus: 8,
    memoryGb: 16,
    storageGb: 1000,
    storage: '1 TB',
    memory: '16 GB',
    monthlyPriceCents: 49900,
    maxConnections: 400,
  },
};

/**
 * `creating` → `running` (after the provisioning delay); `running` → `resizing` → `running` (PUT with a new size);
 * any but `deleting` → `deleting` (DELETE); `deleting` → `running` (cancel-deletion) or removed at
 * `deletion_scheduled`. A real database whose creation did not succeed after its retries is `failed`
 * (`status_reason` says why); it can only be deleted.
 */
export const DATABASE_STATUSES = ['creating', 'running', 'resizing', 'deleting', 'failed'] as const;
export type DatabaseStatus = (typeof DATABASE_STATUSES)[number];

export const BACKUP_TYPES = ['automatic', 'manual', 'final'] as const;
export type BackupType = (typeof BACKUP_TYPES)[number];

export const BACKUP_STATUSES = ['pending', 'completed', 'failed'] as const;
export type BackupStatus = (typeof BACKUP_STATUSES)[number];

export const ENGINE_PORTS: Record<DatabaseEngine, number> = { postgresql: 5432, mysql: 3306, mongodb: 27017 };

/** The URL scheme and the TLS parameter of each engine's connection string. */
export const ENGINE_URLS: Record<DatabaseEngine, { scheme: string; tls: string }> = {
  postgresql: { scheme: 'postgresql', tls: 'sslmode=require' },
  mysql: { scheme: 'mysql', tls: 'ssl-mode=REQUIRED' },
  mongodb: { scheme: 'mongodb', tls: 'tls=true&authSource=admin' },
};

/** The database and the user every new instance is created with. */
export const DEFAULT_DB_NAME = 'defaultdb';
export const DEFAULT_DB_USER = 'dbadmin';

/** Shown in place of the password in every view but the create and reset-password responses. */
export const MASKED_PASSWORD = '****';

export const DEFAULT_BACKUP_RETENTION_DAYS = 7;
export const MIN_BACKUP_RETENTION_DAYS = 1;
export const MAX_BACKUP_RETENTION_DAYS = 35;
/** How long a removed database's final backup stays available to restore from. */
export const FINAL_BACKUP_KEPT_DAYS = 7;

export const DAY_MS = 86_400_000;

/** Names: 1 to 63 lowercase letters, digits and `-`, starting with a letter. */
/** A database's name: 1 to 63 characters (conventions §12), the longest label of a host name. */
export const DATABASE_NAME_MAX_LENGTH = 63;
export const DATABASE_NAME_PATTERN = /^[a-z][a-z0-9-]{0,62}$/;

/**
 * What an organization's backups may hold, per plan (docs/databases.md, "Backup limits"): manual backups kept (not
 * failed) and bytes of every stored backup together. Beyond either, a manual backup is refused (402
 * `PLAN_LIMIT_EXCEEDED`, backups.service.ts); automatic backups are bounded by their retention, final ones by their
 * 7 days.
 */
export const BACKUP_PLAN_LIMITS: Record<PlanId, { manualBackups: number; storageGb: number }> = {
  starter: { manualBackups: 10, storageGb: 100 },
  pro: { manualBackups: 50, storageGb: 1_000 },
  enterprise: { manualBackups: 200, storageGb: 10_000 },
};
