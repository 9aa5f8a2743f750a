import type { AppDeps } from '../../kit/deps.js';
import { defineModule, type ModuleManifest } from '../../kit/module.js';
import { Migration20261121000030_vpn } from './migrations/Migration20261121000030_vpn.js';
import { Migration20261126000030_vpn_agents } from './migrations/Migration20261126000030_vpn_agents.js';
import { Migration20261207000020_vpn_server_address_per_organization } from './migrations/Migration20261207000020_vpn_server_address_per_organization.js';
import { vpnAgentRoutes } from './vpn-agent.routes.js';
import { PeersHub, vpnAgentSweeper } from './vpn-agents.service.js';
import { VpnConnection } from './vpn-connection.entity.js';
import { VpnServer } from './vpn-server.entity.js';
import { vpnConnected, vpnDisconnected, vpnServerCreated, vpnServerDeleted } from './vpn.events.js';
import { vpnActivateJob, vpnSampleUsageJob } from './vpn.jobs.js';
import { vpnRouter } from './vpn.router.js';
import { vpnUsageReport } from './vpn.usage.js';
import { disconnectOrganization } from './vpn.service.js';
import {
  countConnections,
  MikroOrmVpnRepository,
  VPN_ORGANIZATION_ROWS,
  VPN_TABLES,
  type VpnRepository,
} from './vpn.repository.js';

/** What the VPN module keeps per process (`deps.modules.vpn`). */
export interface VpnRuntime {
  /** Every read and write of the module's tables (vpn.repository.ts). */
  readonly repository: VpnRepository;
  /** Wakes the agents' long polls of this process when a server's peers change (docs/vpn-servers.md). */
  readonly peers: PeersHub;
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    vpn: VpnRuntime;
  }
}

// Typed by its name and runtime (not inferred): server/modules.ts checks them against `ModuleRuntimes` above.
export const vpnModule: ModuleManifest<'vpn', VpnRuntime> = defineModule({
  name: 'vpn',
  create: (deps: AppDeps): VpnRuntime => ({
    repository: new MikroOrmVpnRepository(deps.db),
    peers: new PeersHub(),
  }),
  router: vpnRouter,
  entities: [VpnServer, VpnConnection],
  migrations: [
    { name: 'Migration20261121000030_vpn', class: Migration20261121000030_vpn },
    { name: 'Migration20261126000030_vpn_agents', class: Migration20261126000030_vpn_agents },
    {
      name: 'Migration20261207000020_vpn_server_address_per_organization',
      class: Migration20261207000020_vpn_server_address_per_organization,
    },
  ],
  jobs: [vpnActivateJob, vpnSampleUsageJob],
  // Real servers whose agent stopped reporting go offline (docs/vpn-servers.md).
  workers: [vpnAgentSweeper],
  // The VPN agent's protocol (server token only, not user tokens; docs/vpn-servers.md).
  httpRoutes: vpnAgentRoutes,
  events: [vpnConnected, vpnDisconnected, vpnServerCreated, vpnServerDeleted],
  // Deleting a user moves their connections to the user who deleted them; `activity.vpn_connections` counts them.
  ownedResources: [{ table: VPN_TABLES.connections, activity: 'vpn_connections' }],
  onOrganizationDeleted: disconnectOrganization,
  // Its tables, named from the entities (vpn.repository.ts).
  organizationRows: VPN_ORGANIZATION_ROWS,
  usage: [
    {
      feature: 'vpn_connections',
      // From the list's maintained counts (docs/api-conventions.md, "Lists"), not a count of the rows.
      count: countConnections,
    },
  ],
  usageReport: {
    metrics: ['vpn.connections', 'vpn.data_transfer_gb', 'vpn.server_hours'],
    report: (em, organizationId, period, now) => vpnUsageReport(em, organizationId, period, now),
  },
});
