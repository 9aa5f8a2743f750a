import type { Config } from '../../config.js';
import type { AppDeps } from '../../kit/deps.js';
import { countedRows } from '../../db/list-counts.js';
import { defineModule, type ModuleManifest, type RunningWorker } from '../../kit/module.js';
import { BuildLogHub } from './build-logs.js';
import { HostingBuildLog } from './hosting-build-log.entity.js';
import { HostingDeployment } from './hosting-deployment.entity.js';
import type { HostingDriver } from './hosting.driver.js';
import { hostingDeploymentFailed, hostingDeploymentSucceeded } from './hosting.events.js';
import { hostingBuildJob, resumeBuilds } from './hosting.jobs.js';
import { hostingRouter } from './hosting.router.js';
import { HostingSite } from './hosting-site.entity.js';
import { hostingUsageReporter } from './hosting.usage.js';
import { HostingUsageRecord } from './hosting-usage-record.entity.js';
import { Migration20261121000060_hosting } from './migrations/Migration20261121000060_hosting.js';
import { SimulatedHostingDriver } from './simulated-hosting.driver.js';

/** What hosting keeps per process (`deps.modules.hosting`). */
export interface HostingRuntime {
  /** The builder (hosting.driver.ts). */
  readonly driver: HostingDriver;
  /** The followers of build logs in this process, and their LISTEN connection (build-logs.ts). */
  readonly logHub: BuildLogHub;
}

/** The name of the worker that resumes builds at start and relays build log notifications. */
export const HOSTING_BUILDS_WORKER = 'hosting.builds';

// Typed by its name and runtime (not inferred): the type of `deps.modules` is derived from it.
export const hostingModule: ModuleManifest<'hosting', HostingRuntime> = defineModule({
  name: 'hosting',
  router: hostingRouter,
  create: (deps: AppDeps, config: Config): HostingRuntime => ({
    // The simulated builder (README, "Hosting"); it fetches from private addresses only where webhooks may.
    driver: new SimulatedHostingDriver({ allowPrivate: config.webhook.allowPrivateTargets }),
    logHub: new BuildLogHub(deps),
  }),
  entities: [HostingSite, HostingDeployment, HostingBuildLog, HostingUsageRecord],
  migrations: [{ name: 'Migration20261121000060_hosting', class: Migration20261121000060_hosting }],
  jobs: [hostingBuildJob],
  workers: [
    {
      name: HOSTING_BUILDS_WORKER,
      async start(deps: AppDeps): Promise<RunningWorker> {
        // One LISTEN connection per process for every follower of a build log (PostgreSQL).
        const hub = deps.modules.hosting.logHub;
        await hub.start();
        // Builds a stop or a crash interrupted go on (hosting.jobs.ts).
        await resumeBuilds(deps);
        return { stop: () => hub.stop() };
      },
    },
  ],
  events: [hostingDeploymentSucceeded, hostingDeploymentFailed],
  // Deleting a user moves their sites to the user who deleted them (deployments and logs follow their site).
  ownedResources: [{ table: 'hosting_sites' }],
  organizationRows: {
    remove: [
      {
        table: 'hosting_build_logs',
        where: `"deployment_id" in (select d."id" from "hosting_deployments" d join "hosting_sites" s on s."id" = d."site_id" where s."organization_id" = ?)`,
      },
      {
        table: 'hosting_deployments',
        where: `"site_id" in (select "id" from "hosting_sites" where "organization_id" = ?)`,
      },
      { table: 'hosting_sites' },
      { table: 'hosting_usage_records' },
    ],
  },
  usage: [
    {
      feature: 'hosting_sites',
      // From the list's maintained counts (README, "Lists"), not a count of the rows.
      count: (em, organizationId) => countedRows(em, 'hosting_sites', organizationId),
    },
  ],
  usageReport: hostingUsageReporter,
});
