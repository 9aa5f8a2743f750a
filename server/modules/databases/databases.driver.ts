import type { DatabaseEngine, DatabaseRegion, DatabaseSize } from './databases.constants.js';

/**
 * The database hosts this API manages, as an interface: no real hosts are reachable, so the built-in driver
 * simulates them (simulated-databases.driver.ts), the way Stripe has a test mode. The service records every change
 * in its own tables and asks the driver to carry it out; durable jobs (databases.jobs.ts) finish each change when
 * the driver says it is done (`readyInMs`), so a change survives a restart. The process's driver is
 * `deps.modules.databases.driver`, chosen from the configuration by the module's `create` (databases.module.ts).
 */
export interface DatabaseInstance {
  id: string;
  name: string;
  engine: DatabaseEngine;
  version: string;
  size: DatabaseSize;
  region: DatabaseRegion;
  host: string;
  multiAz: boolean;
}

/** A change the driver started: the job that finishes it runs after `readyInMs`. */
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
  /** The host name of a new instance: `<name>-<random>.<region>.db.example.com` for the simulated one. */
  hostname(spec: { name: string; region: DatabaseRegion }): string;
  /** Starts an empty instance, or one holding the data of `fromBackupId`. */
  provision(
    instance: DatabaseInstance,
    opts: { fromBackupId?: string | undefined },
  ): Promise<DriverOperation>;
  /** Moves the instance to `size` (`instance.size` is the size it had). */
  resize(instance: DatabaseInstance, size: DatabaseSize): Promise<DriverOperation>;
  /** Sets the admin user's password (the API stores only a hash of it). */
  setPassword(instance: DatabaseInstance, password: string): Promise<void>;
  /** Starts a backup. */
  startBackup(instance: DatabaseInstance, backupId: string): Promise<DriverOperation>;
  /** The size in bytes of a finished backup. */
  backupSize(instance: DatabaseInstance, backupId: string, at: Date): Promise<number>;
  /** Drops a backup's data. */
  deleteBackup(backupId: string): Promise<void>;
  /** Stops and removes the instance (its final backup stays). */
  destroy(instance: DatabaseInstance): Promise<void>;
  /** The instance's load at `at` (read on every view, so synchronous and cheap). */
  metrics(instance: DatabaseInstance, at: Date): InstanceMetrics;
}
