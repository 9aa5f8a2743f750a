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
import { reapOrphanedTools } from './drivers/engine-server.js';
import { DATABASE_JOBS } from './databases.jobs.js';
import {
  DATABASES_TABLES,
  MikroOrmDatabasesRepository,
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
  /** Every read and write of the module's tables (databases.repository.ts). */
  readonly repository: DatabasesRepository;
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    databases: DatabasesRuntime;
  }
}

/**
 * The driver of this process, from the configuration: real servers with `DATABASE_HOSTS` (docs/databases.md, "Databases",
 * Real servers), dumps in `BACKUP_DIR`; otherwise the simulated hosts (docs/databases.md, "Databases", Simulation), each change
 * done after PROVISIONING_DELAY_MS.
 */
async function createDatabasesRuntime(deps: AppDeps, config: Config): Promise<DatabasesRuntime> {
  const { hosts, backupDir, tools } = config.databases;
  let driver: DatabaseDriver;
  if (hosts) {
    const store = new DirectoryBackupStore(backupDir);
    // What a process that died left behind (docs/databases.md, "Limits of the tools"): its tools, and the dumps
    // they were writing.
    const reaped = reapOrphanedTools();
    const swept = await store.sweepPartials(tools.timeoutMs + 60_000);
    if (reaped + swept > 0) deps.log.warn({ reaped, swept }, 'database tools of a previous run cleaned up');
    driver = new HostedDatabaseDriver(hosts, store, deps.log, config.databases.capacity);
  } else driver = new SimulatedDatabaseDriver(config.provisioningDelayMs);
  return { driver, repository: new MikroOrmDatabasesRepository(deps.db) };
}

// Typed by its name and runtime (not inferred): server/modules.ts checks them against `ModuleRuntimes` above.
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
