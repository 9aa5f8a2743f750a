import type { Config } from '../../config.js';
import type { AppDeps } from '../../kit/deps.js';
import { defineModule, type ModuleManifest } from '../../kit/module.js';
import { DatabaseBackup } from './database-backup.entity.js';
import { DatabaseUsagePeriod } from './database-usage-period.entity.js';
import { ManagedDatabase } from './database.entity.js';
import type { DatabaseDriver } from './databases.driver.js';
import { DATABASE_EVENTS } from './databases.events.js';
import { DirectoryBackupStore } from './drivers/backup-store.js';
import { HostedDatabaseDriver } from './drivers/hosted-databases.driver.js';
import { DATABASE_JOBS } from './databases.jobs.js';
import {
  DATABASES_TABLES,
  mikroDatabasesRepository,
  type DatabasesRepository,
} from './databases.repository.js';
import { databasesRouter } from './databases.router.js';
import { databasesUsageCounter, databasesUsageReporter } from './databases.usage.js';
import { Migration20261121000050_databases } from './migrations/Migration20261121000050_databases.js';
import { Migration20261126000050_databases_real } from './migrations/Migration20261126000050_databases_real.js';
import { SimulatedDatabaseDriver } from './simulated-databases.driver.js';

/** What the databases module keeps per process (`deps.modules.databases`). */
export interface DatabasesRuntime {
  /** The database hosts (databases.driver.ts). */
  readonly driver: DatabaseDriver;
  /** Every query of the module (databases.repository.ts). */
  readonly repository: DatabasesRepository;
}

/**
 * The driver of this process, from the configuration: real servers with `DATABASE_HOSTS` (docs/databases.md, "Databases",
 * Real servers), dumps in `BACKUP_DIR`; otherwise the simulated hosts (docs/databases.md, "Databases", Simulation), each change
 * done after PROVISIONING_DELAY_MS.
 */
function createDatabasesRuntime(deps: AppDeps, config: Config): DatabasesRuntime {
  const { hosts, backupDir } = config.databases;
  return {
    driver: hosts
      ? new HostedDatabaseDriver(hosts, new DirectoryBackupStore(backupDir), deps.log)
      : new SimulatedDatabaseDriver(config.provisioningDelayMs),
    repository: mikroDatabasesRepository(deps),
  };
}

// Typed by its name and runtime (not inferred): the type of `deps.modules` is derived from it.
export const databasesModule: ModuleManifest<'databases', DatabasesRuntime> = defineModule({
  name: 'databases',
  router: databasesRouter,
  create: createDatabasesRuntime,
  // The real drivers' admin connection pools close with the process.
  stop: (runtime) => runtime.driver.close(),
  entities: [ManagedDatabase, DatabaseBackup, DatabaseUsagePeriod],
  migrations: [
    { name: 'Migration20261121000050_databases', class: Migration20261121000050_databases },
    { name: 'Migration20261126000050_databases_real', class: Migration20261126000050_databases_real },
  ],
  jobs: DATABASE_JOBS,
  events: DATABASE_EVENTS,
  // Deleting a user moves their databases (removed ones included) to the user who deleted them;
  // `activity.databases_created` counts those not removed.
  ownedResources: [
    { table: DATABASES_TABLES.databases, activity: 'databases_created', countWhere: '"removed_at" is null' },
  ],
  organizationRows: {
    remove: [
      { table: DATABASES_TABLES.backups },
      { table: DATABASES_TABLES.usagePeriods },
      { table: DATABASES_TABLES.databases },
    ],
  },
  usage: [databasesUsageCounter],
  usageReport: databasesUsageReporter,
});
