import { defineModule } from '../../kit/module.js';
import { countedRows } from '../../db/list-counts.js';
import { Migration20261121000030_vpn } from './migrations/Migration20261121000030_vpn.js';
import { VpnConnection } from './vpn-connection.entity.js';
import { VpnServer } from './vpn-server.entity.js';
import { vpnConnected, vpnDisconnected, vpnServerCreated, vpnServerDeleted } from './vpn.events.js';
import { vpnActivateJob, vpnSampleUsageJob } from './vpn.jobs.js';
import { vpnRouter } from './vpn.router.js';
import { vpnUsageReport } from './vpn.usage.js';
import { disconnectOrganization } from './vpn.service.js';

export const vpnModule = defineModule({
  name: 'vpn',
  router: vpnRouter,
  entities: [VpnServer, VpnConnection],
  migrations: [{ name: 'Migration20261121000030_vpn', class: Migration20261121000030_vpn }],
  jobs: [vpnActivateJob, vpnSampleUsageJob],
  events: [vpnConnected, vpnDisconnected, vpnServerCreated, vpnServerDeleted],
  // Deleting a user moves their connections to the user who deleted them; `activity.vpn_connections` counts them.
  ownedResources: [{ table: 'vpn_connections', activity: 'vpn_connections' }],
  onOrganizationDeleted: disconnectOrganization,
  organizationRows: {
    remove: [{ table: 'vpn_connections' }],
    keep: { vpn_servers: 'the catalogue of servers, shared by every organization' },
  },
  usage: [
    {
      feature: 'vpn_connections',
      // From the list's maintained counts (README, "Lists"), not a count of the rows.
      count: (em, organizationId) => countedRows(em, 'vpn_connections', organizationId),
    },
  ],
  usageReport: {
    metrics: ['vpn.connections', 'vpn.data_transfer_gb', 'vpn.server_hours'],
    report: (em, organizationId, period, now) => vpnUsageReport(em, organizationId, period, now),
  },
});
