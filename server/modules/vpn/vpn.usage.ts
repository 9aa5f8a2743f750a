import type { Em } from '../../db/orm.js';
import type { UsageMetric, UsagePeriod } from '../../kit/usage.js';
import { connectionsOf } from './vpn.repository.js';
import { projectUsage } from './vpn.simulation.js';

const GB = 1e9;

/**
 * The VPN measures of the usage report, from the connections' own records: the connections the organization has
 * now, their traffic (upload plus download, in GB with two decimals: the totals of the connections that exist, as
 * stored per connection), and the hours connections were `active` within the period (the current session of each
 * active connection; sessions that ended are not kept per period).
 */
export async function vpnUsageReport(
  em: Em,
  organizationId: string,
  period: UsagePeriod,
  now: Date,
): Promise<Partial<Record<UsageMetric, number>>> {
  const connections = await connectionsOf(em, organizationId);
  let bytes = 0;
  let activeMs = 0;
  const end = now < period.end ? now : period.end;
  for (const c of connections) {
    const u = projectUsage(c, now);
    bytes += u.upload + u.download;
    if (c.status === 'active' && c.connectedAt) {
      const from = c.connectedAt > period.start ? c.connectedAt : period.start;
      activeMs += Math.max(0, end.getTime() - from.getTime());
    }
  }
  return {
    'vpn.connections': connections.length,
    'vpn.data_transfer_gb': Math.round((bytes / GB) * 100) / 100,
    'vpn.server_hours': Math.round((activeMs / 3_600_000) * 100) / 100,
  };
}
