import type { AppDeps } from '../../kit/deps.js';
import { countedRows } from '../../db/list-counts.js';
import { defineModule } from '../../kit/module.js';
import { logHub } from './build-logs.js';
import { HostingEdgeTraffic } from './hosting-edge-traffic.entity.js';
import { HostingBuildLog } from './hosting-build-log.entity.js';
import { HostingDeployment } from './hosting-deployment.entity.js';
import { hostingDeploymentFailed, hostingDeploymentSucceeded } from './hosting.events.js';
import { hostingArtifacts, hostingBuildJob, resumeBuilds } from './hosting.jobs.js';
import { Edge } from './edge.js';
import { flushEdgeTraffic } from './edge-traffic.js';
import { stopProcessBuilds } from './process-builds.js';
import { hostingRouter } from './hosting.router.js';
import { HostingSite } from './hosting-site.entity.js';
import { hostingUsageReporter } from './hosting.usage.js';
import { HostingUsageRecord } from './hosting-usage-record.entity.js';
import { Migration20261121000060_hosting } from './migrations/Migration20261121000060_hosting.js';
import { Migration20261126000061_hosting_builds } from './migrations/Migration20261126000061_hosting_builds.js';

const edgeAddresses = new WeakMap<AppDeps, number>();

/** The port the edge of this process listens on (tests give EDGE_PORT=0), if it serves. */
export function edgePort(deps: AppDeps): number | undefined {
  return edgeAddresses.get(deps);
}

/** The name of the worker that resumes builds at start and relays build log notifications. */
export const HOSTING_BUILDS_WORKER = 'hosting.builds';

export const hostingModule = defineModule({
  name: 'hosting',
  router: hostingRouter,
  entities: [HostingSite, HostingDeployment, HostingBuildLog, HostingUsageRecord, HostingEdgeTraffic],
  migrations: [
    { name: 'Migration20261121000060_hosting', class: Migration20261121000060_hosting },
    { name: 'Migration20261126000061_hosting_builds', class: Migration20261126000061_hosting_builds },
  ],
  jobs: [hostingBuildJob],
  workers: [
    {
      name: HOSTING_BUILDS_WORKER,
      async start(deps: AppDeps) {
        // One LISTEN connection per process for every follower of a build log (PostgreSQL).
        const hub = logHub(deps);
        await hub.start();
        // Builds a stop or a crash interrupted go on (hosting.jobs.ts).
        await resumeBuilds(deps);
        // The edge, when this process serves sites (EDGE_PORT).
        const edgeConfig = deps.config.hosting.edge;
        const edge = edgeConfig ? new Edge(deps, hostingArtifacts(deps)) : undefined;
        if (edge && edgeConfig) {
          const address = await edge.listen(edgeConfig.port, edgeConfig.host);
          edgeAddresses.set(deps, address.port);
          deps.log.info({ port: address.port, host: edgeConfig.host }, 'edge listening');
        }
        return {
          stop: async () => {
            await edge?.close();
            await flushEdgeTraffic(deps);
            await stopProcessBuilds(deps);
            await hub.stop();
          },
        };
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
        table: 'hosting_edge_traffic',
        where: `"site_id" in (select "id" from "hosting_sites" where "organization_id" = ?)`,
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
