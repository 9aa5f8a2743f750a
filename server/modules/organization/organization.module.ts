import { defineModule } from '../../kit/module.js';
import { Migration20261125000001_organization } from './migrations/Migration20261125000001_organization.js';
import { organizationPurgeJob, organizationPurgeResumer } from './organization.jobs.js';
import { organizationRouter } from './organization.router.js';

/**
 * The organization itself (docs/organization.md, "The organization"): view, rename, ownership transfer, deletion. Its row and
 * users are the core's; this module owns the deletion mark's migration and the job that removes a deleted
 * organization's rows, as every module's manifest describes them (`organizationRows`).
 */
export const organizationModule = defineModule({
  name: 'organization',
  router: organizationRouter,
  migrations: [{ name: 'Migration20261125000001_organization', class: Migration20261125000001_organization }],
  jobs: [organizationPurgeJob],
  workers: [organizationPurgeResumer],
});
