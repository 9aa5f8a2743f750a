import type { Config } from '../../config.js';
import { defineModule, type ModuleManifest } from '../../kit/module.js';
import { DatabaseBackup } from './database-backup.entity.js';
import { DatabaseUsagePeriod } from './database-usage-period.entity.js';
import { ManagedDatabase } from './database.entity.js';
import type { DatabaseDriver } from './databases.driver.js';
import { DATABASE_EVENTS } from './databases.events.js';
import { DATABASE_JOBS } from './databases.jobs.js';
import { databasesRouter } from './databases.router.js';
import { databasesUsageCounter, databasesUsageReporter } from './databases.usage.js';
import { Migration20261121000050_databases } from './migrations/Migration20261121000050_databases.js';
import { SimulatedDatabaseDriver } from './simulated-databases.driver.js';

/** What the databases module keeps per process (`deps.modules.databases`). */
export interface DatabasesRuntime {
  /** The database hosts (databases.driver.ts). */
  readonly driver: DatabaseDriver;
}

// Typed by its name and runtime (not inferred): the type of `deps.modules` is derived from it.
export const databasesModule: ModuleManifest<'databases', DatabasesRuntime> = defineModule({
  name: 'databases',
  router: databasesRouter,
  // The simulated hosts (README, "Databases", Simulation), each change done after PROVISIONING_DELAY_MS.
  create: (_deps, config: Config): DatabasesRuntime => ({
    driver: new SimulatedDatabaseDriver(config.provisioningDelayMs),
  }),
  entities: [ManagedDatabase, DatabaseBackup, DatabaseUsagePeriod],
  migrations: [{ name: 'Migration20261121000050_databases', class: Migration20261121000050_databases }],
  jobs: DATABASE_JOBS,
  events: DATABASE_EVENTS,
  // Deleting a user moves their databases (removed ones included) to the user who deleted them;
  // `activity.databases_created` counts those not removed.
  ownedResources: [{ table: 'databases', activity: 'databases_created', countWhere: '"removed_at" is null' }],
  organizationRows: {
    remove: [{ table: 'database_backups' }, { table: 'database_usage_periods' }, { table: 'databases' }],
  },
  usage: [databasesUsageCounter],
  usageReport: databasesUsageReporter,
});
