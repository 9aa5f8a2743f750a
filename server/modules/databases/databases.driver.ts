import type { DatabaseEngine, DatabaseRegion, DatabaseSize } from './databases.constants.js';

/**
 * A failure that trying again cannot mend (a backup that does not match its checksum): the job that met it fails
 * the operation at once with its message instead of retrying.
 */
export class PermanentDriverError extends Error {
  override name = 'PermanentDriverError';
}

/**
 * The database hosts this API manages, as an interface (docs/databases.md, "Databases"). Without `DATABASE_HOSTS` the built-in
 * driver simulates them (simulated-databases.driver.ts), the way Stripe has a test mode; with it, the hosted driver
 * (drivers/hosted-databases.driver.ts) creates real databases on those servers. The service records every change in
 * its own tables (the desired state) and durable jobs (databases.jobs.ts) ask the driver to carry it out, so a
 * change survives a restart; the driver decides no policy (sizes, limits, permissions are the service's). The
 * process's driver is `runtimeOf(deps, 'databases').driver`, chosen from the configuration by the module's `create`
 * (databases.module.ts).
 */
export interface DatabaseInstance {
  id: string;
  name: string;
  engine: DatabaseEngine;
  version: string;
  size: DatabaseSize;
  region: DatabaseRegion;
  host: string;
  port: number;
  dbName: string;
  dbUser: string;
  /** The server it lives on (`DatabaseHost.key`); null: simulated. */
  server: string | null;
  multiAz: boolean;
}

/** Where a new database can live. */
export interface Placement {
  /** null: simulated. */
  server: string | null;
  host: string;
  port: number;
  dbName: string;
  dbUser: string;
}

/** A change the driver started: the job that carries it out runs after `readyInMs`. */
export interface DriverOperation {
  readyInMs: number;
}

/** What the detail view shows of a running instance (percentages 0–100, connections 0–max). */
export interface InstanceMetrics {
  cpuUsage: number;
  memoryUsage: number;
  storageUsage: number;
  activeConnections: number;
}

export interface DatabaseDriver {
  /**
   * The places a new database `id` can go: one per server of its engine and region taking new databases (the
   * service puts it on the one holding the fewest); empty when there is none (the create is refused).
   */
  placements(spec: { id: string; name: string; engine: DatabaseEngine; region: DatabaseRegion }): Placement[];
  /**
   * The connections `server` gives its tenants' databases (its `max_connections` less a reserve): the connection
   * limits of the databases placed on it never add up to more. Absent or null: no bound (simulated).
   */
  connectionCapacity?(server: string): Promise<number | null>;
  /**
   * The form of `password` the engine's server stores (a SCRAM verifier, a native password hash): what the job that
   * creates the login carries, so that the password itself is never stored. null when simulated.
   */
  passwordVerifier(engine: DatabaseEngine, password: string): string | null;
  /** Starts an empty instance, or one holding the data of `fromBackupId` (the job runs `create` after `readyInMs`). */
  provision(
    instance: DatabaseInstance,
    opts: { fromBackupId?: string | undefined },
  ): Promise<DriverOperation>;
  /**
   * Carries out the creation (the readiness job): idempotent (what exists is checked first), and a failure leaves
   * nothing half-made on the server.
   */
  create(
    instance: DatabaseInstance,
    opts: { fromBackupId?: string | null | undefined; verifier: string | null },
  ): Promise<void>;
  /** Starts moving the instance to `size` (`instance.size` is the size it had); `applySize` carries it out. */
  resize(instance: DatabaseInstance, size: DatabaseSize): Promise<DriverOperation>;
  /** Applies `instance.size` (the readiness job after a resize): the connection limit. */
  applySize(instance: DatabaseInstance): Promise<void>;
  /** Sets the login's password at once (its sessions end); the API stores only a hash of it. */
  setPassword(instance: DatabaseInstance, password: string): Promise<void>;
  /** Starts a backup (`runBackup` takes it after `readyInMs`). */
  startBackup(instance: DatabaseInstance, backupId: string): Promise<DriverOperation>;
  /** Takes the backup into the store (the completion job); its size in bytes. */
  runBackup(instance: DatabaseInstance, backupId: string, at: Date): Promise<number>;
  /** Drops a backup's data. */
  deleteBackup(backupId: string): Promise<void>;
  /**
   * Closes the instance to its owner for good (the end of a deletion's grace): no new login, its sessions ended.
   * None for simulated hosts.
   */
  disableLogin?(instance: DatabaseInstance): Promise<void>;
  /** Stops and removes the instance (its final backup stays). */
  destroy(instance: DatabaseInstance): Promise<void>;
  /** The instance's load at `at`. */
  metrics(instance: DatabaseInstance, at: Date): Promise<InstanceMetrics>;
  /** Bytes the instance stores (the storage check of the sweep); null when simulated. */
  storageBytes(instance: DatabaseInstance): Promise<number | null>;
  /** Makes the instance read-only (over its storage) or writable again. */
  setReadOnly(instance: DatabaseInstance, readOnly: boolean): Promise<void>;
  /** Closes admin connections (at stop). */
  close(): Promise<void>;
}
