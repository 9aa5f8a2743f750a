import type { AppDeps } from '../../kit/deps.js';
import { defineModule, type ModuleManifest } from '../../kit/module.js';
import { Migration20261125000001_organization } from './migrations/Migration20261125000001_organization.js';
import { Migration20261207000050_organization_security } from './migrations/Migration20261207000050_organization_security.js';
import { organizationPurgeJob, organizationPurgeResumer } from './organization.jobs.js';
import { MikroOrmOrganizationRepository, type OrganizationRepository } from './organization.repository.js';
import { organizationRouter } from './organization.router.js';

/** What organization keeps per process (`deps.modules.organization`). */
export interface OrganizationRuntime {
  /** Every read and write of the module (organization.repository.ts). */
  readonly repository: OrganizationRepository;
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    organization: OrganizationRuntime;
  }
}

/**
 * The organization itself (docs/organization.md, "The organization"): view, rename, ownership transfer, deletion. Its row and
 * users are the core's; this module owns the deletion mark's migration and the job that removes a deleted
 * organization's rows, as every module's manifest describes them (`organizationRows`).
 */
// Typed by its name and runtime (not inferred): server/modules.ts checks them against `ModuleRuntimes` above.
export const organizationModule: ModuleManifest<'organization', OrganizationRuntime> = defineModule({
  name: 'organization',
  router: organizationRouter,
  create: (deps: AppDeps): OrganizationRuntime => ({
    repository: new MikroOrmOrganizationRepository(deps.db),
  }),
  migrations: [
    { name: 'Migration20261125000001_organization', class: Migration20261125000001_organization },
    {
      name: 'Migration20261207000050_organization_security',
      class: Migration20261207000050_organization_security,
    },
  ],
  jobs: [organizationPurgeJob],
  workers: [organizationPurgeResumer],
});
