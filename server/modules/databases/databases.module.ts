import { defineModule } from '../../kit/module.js';
import { DatabaseBackup } from './database-backup.entity.js';
import { DatabaseUsagePeriod } from './database-usage-period.entity.js';
import { ManagedDatabase } from './database.entity.js';
import { DATABASE_EVENTS } from './databases.events.js';
import { DATABASE_JOBS } from './databases.jobs.js';
import { databasesRouter } from './databases.router.js';
import { databasesUsageCounter, databasesUsageReporter } from './databases.usage.js';
import { Migration20261121000050_databases } from './migrations/Migration20261121000050_databases.js';
import { Migration20261126000050_databases_real } from './migrations/Migration20261126000050_databases_real.js';

export const databasesModule = defineModule({
  name: 'databases',
  router: databasesRouter,
  entities: [ManagedDatabase, DatabaseBackup, DatabaseUsagePeriod],
  migrations: [
    { name: 'Migration20261121000050_databases', class: Migration20261121000050_databases },
    { name: 'Migration20261126000050_databases_real', class: Migration20261126000050_databases_real },
  ],
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
