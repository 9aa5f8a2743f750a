import { runtimeOf } from '../../kit/runtime.js';
import type { Config } from '../../config.js';
import type { AppDeps } from '../../kit/deps.js';
import { defineModule, type ModuleManifest, type RunningWorker } from '../../kit/module.js';
import { BuildLogHub } from './build-logs.js';
import { HostingEdgeTraffic } from './hosting-edge-traffic.entity.js';
import { HostingBuildLog } from './hosting-build-log.entity.js';
import { HostingDeployment } from './hosting-deployment.entity.js';
import type { HostingDriver } from './hosting.driver.js';
import { hostingDeploymentFailed, hostingDeploymentSucceeded } from './hosting.events.js';
import { resumeBuilds } from './builds.service.js';
import { hostingBuildJob, hostingCollectArtifactsJob } from './hosting.jobs.js';
import { Edge, type EdgeRouteCache } from './edge.js';
import { flushEdgeTraffic, newEdgeTrafficCounters, type EdgeTrafficCounters } from './edge-traffic.js';
import { stopProcessBuilds, type RunningBuilds } from './process-builds.js';
import { hostingRouter } from './hosting.router.js';
import { HostingSite } from './hosting-site.entity.js';
import { hostingUsageReporter } from './hosting.usage.js';
import { HostingUsageRecord } from './hosting-usage-record.entity.js';
import { Migration20261121000060_hosting } from './migrations/Migration20261121000060_hosting.js';
import { Migration20261126000061_hosting_builds } from './migrations/Migration20261126000061_hosting_builds.js';
import { Migration20261207000010_hosting_domain_verification } from './migrations/Migration20261207000010_hosting_domain_verification.js';
import { encryptClearEnvironments } from './site-environment.js';
import { SimulatedHostingDriver } from './simulated-hosting.driver.js';
import { LocalHostingDriver } from './local-hosting.driver.js';
import { DirectoryArtifactStore, type ArtifactStore } from './artifact-store.js';
import {
  countSites,
  HOSTING_TABLES,
  HOSTING_ORGANIZATION_ROWS,
  MikroOrmHostingRepository,
  type HostingRepository,
} from './hosting.repository.js';

/** What hosting keeps per process (`deps.modules.hosting`). */
export interface HostingRuntime {
  /** Every read and write of the module's tables (hosting.repository.ts). */
  readonly repository: HostingRepository;
  /** The builder (hosting.driver.ts), chosen by `BUILDER`. */
  readonly driver: HostingDriver;
  /** The followers of build logs in this process, and their LISTEN connection (build-logs.ts). */
  readonly logHub: BuildLogHub;
  /** Where artifacts are kept and read (`ARTIFACTS_DIR`, artifact-store.ts). */
  readonly artifacts: ArtifactStore;
  /** Real builds running in this process (process-builds.ts). */
  readonly builds: RunningBuilds;
  /** Which deployment each host serves, remembered briefly (edge.ts). */
  readonly edgeRoutes: EdgeRouteCache;
  /** What the edge served, not yet written (edge-traffic.ts). */
  readonly traffic: EdgeTrafficCounters;
  /** The edge of this process when `EDGE_PORT` is set (edge.ts); its port once listening. */
  readonly edge: { readonly server: Edge | undefined; port: number | undefined };
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    hosting: HostingRuntime;
  }
}

/** The builder `BUILDER` names: the simulated one (the test mode) or real builds here (docs/hosting.md). */
function createDriver(config: Config, artifacts: ArtifactStore): HostingDriver {
  const policy = { allowPrivate: config.webhook.allowPrivateTargets };
  if (config.hosting.builder === 'simulated') return new SimulatedHostingDriver(policy);
  return new LocalHostingDriver({
    policy,
    sandbox: config.hosting.sandbox,
    timeoutMs: config.hosting.buildTimeoutMs,
    concurrency: config.hosting.buildConcurrency,
    store: artifacts,
    // A build sees an allow-list of the host, never the API's data or configuration (docs/hosting.md, "The sandbox").
    memoryLimit: config.hosting.buildMemoryLimit,
    diskLimit: config.hosting.buildDiskLimit,
  });
}

/** The port the edge of this process listens on (tests give EDGE_PORT=0), if it serves. */
export function edgePort(deps: AppDeps): number | undefined {
  return runtimeOf(deps, 'hosting').edge.port;
}

/** The name of the worker that resumes builds at start and relays build log notifications. */
export const HOSTING_BUILDS_WORKER = 'hosting.builds';

// Typed by its name and runtime (not inferred): server/modules.ts checks them against `ModuleRuntimes` above.
export const hostingModule: ModuleManifest<'hosting', HostingRuntime> = defineModule({
  name: 'hosting',
  router: hostingRouter,
  create: (deps: AppDeps, config: Config): HostingRuntime => {
    const artifacts = new DirectoryArtifactStore(
      config.hosting.artifactsDir,
      config.hosting.artifactMaxBytes,
    );
    return {
      repository: new MikroOrmHostingRepository(deps.db),
      driver: createDriver(config, artifacts),
      logHub: new BuildLogHub(deps),
      artifacts,
      builds: new Map(),
      edgeRoutes: new Map(),
      traffic: newEdgeTrafficCounters(),
      edge: { server: config.hosting.edge ? new Edge(deps, artifacts) : undefined, port: undefined },
    };
  },
  entities: [HostingSite, HostingDeployment, HostingBuildLog, HostingUsageRecord, HostingEdgeTraffic],
  migrations: [
    { name: 'Migration20261121000060_hosting', class: Migration20261121000060_hosting },
    { name: 'Migration20261126000061_hosting_builds', class: Migration20261126000061_hosting_builds },
    {
      name: 'Migration20261207000010_hosting_domain_verification',
      class: Migration20261207000010_hosting_domain_verification,
    },
  ],
  jobs: [hostingBuildJob, hostingCollectArtifactsJob],
  workers: [
    {
      name: HOSTING_BUILDS_WORKER,
      async start(deps: AppDeps): Promise<RunningWorker> {
        // One LISTEN connection per process for every follower of a build log (PostgreSQL).
        const hub = runtimeOf(deps, 'hosting').logHub;
        await hub.start();
        // What the builds of a crashed API left behind goes before any build starts (docs/hosting.md, "The sandbox").
        const driver = runtimeOf(deps, 'hosting').driver;
        if (driver instanceof LocalHostingDriver) await driver.removeStale();
        // Builds a stop or a crash interrupted go on (builds.service.ts).
        await resumeBuilds(deps);
        // The edge, when this process serves sites (EDGE_PORT).
        const edgeConfig = deps.config.hosting.edge;
        const runtime = runtimeOf(deps, 'hosting').edge;
        const edge = runtime.server;
        if (edge && edgeConfig) {
          const address = await edge.listen(edgeConfig.port, edgeConfig.host);
          runtime.port = address.port;
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
  ownedResources: [{ table: HOSTING_TABLES.sites }],
  encryptAtRest: encryptClearEnvironments,
  atRest: [{ table: HOSTING_TABLES.sites, column: 'environment_variables', key: 'secrets', json: true }],
  // Its tables, named from the entities (hosting.repository.ts).
  organizationRows: HOSTING_ORGANIZATION_ROWS,
  usage: [
    {
      feature: 'hosting_sites',
      // From the list's maintained counts (docs/api-conventions.md, "Lists"), not a count of the rows.
      count: countSites,
    },
  ],
  usageReport: hostingUsageReporter,
});
