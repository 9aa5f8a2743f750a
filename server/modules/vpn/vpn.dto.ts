import { humanDuration, iso } from '../../lib/time.js';
import type { ConnectionStatus, VpnProtocol } from './vpn.constants.js';
import type { VpnConnection } from './vpn-connection.entity.js';
import type { VpnServer } from './vpn-server.entity.js';
import { projectUsage, type UsageState } from './vpn.simulation.js';
import type { TConnection, TConnectionDetail, TServer } from './vpn.schema.js';
import { CLIENT_ALLOWED_IPS, CLIENT_DNS } from './wireguard.js';

/** `host:port` a client of this protocol connects to. */
export function serverEndpoint(server: VpnServer, protocol: VpnProtocol): string {
  const port = protocol === 'openvpn' ? server.openvpnPort : server.port;
  return `${server.host.includes(':') ? `[${server.host}]` : server.host}:${port}`;
}

/** What the list view needs of a connection: the entity, or a row of the list query (vpn.repository.ts). */
export interface ConnectionView extends UsageState {
  id: string;
  name: string;
  status: ConnectionStatus;
  statusMessage?: string | null;
  location: string;
  protocol: VpnProtocol;
  server: { id: string };
  user: { id: string };
  autoConnect: boolean;
  createdAt: Date;
  updatedAt: Date;
}

/** The list view. `now` drives the simulated usage, so a fake clock gives exact values. */
export function toConnectionDto(c: ConnectionView, now: Date): TConnection {
  const usage = projectUsage(c, now);
  return {
    id: c.id,
    name: c.name,
    status: c.status,
    status_message: c.statusMessage ?? null,
    location: c.location as TConnection['location'],
    protocol: c.protocol,
    server_id: c.server.id,
    user_id: c.user.id,
    auto_connect: c.autoConnect,
    created_at: iso(c.createdAt)!,
    updated_at: iso(c.updatedAt)!,
    connected_at: c.status === 'active' ? iso(c.connectedAt) : null,
    last_activity: iso(usage.lastActivity),
    data_usage: { upload: usage.upload, download: usage.download },
  };
}

/** The detail view; `wgQuick` only when the create response hands out the client configuration once. */
export function toConnectionDetailDto(
  c: VpnConnection,
  server: VpnServer,
  now: Date,
  wgQuick: string | null = null,
): TConnectionDetail {
  const base = toConnectionDto(c, now);
  const uptimeMs = c.status === 'active' && c.connectedAt ? now.getTime() - c.connectedAt.getTime() : 0;
  return {
    ...base,
    config: {
      endpoint: serverEndpoint(server, c.protocol),
      public_key: server.publicKey,
      client_public_key: c.clientPublicKey ?? null,
      address: c.clientAddress ?? null,
      dns: [...CLIENT_DNS],
      allowed_ips: [...CLIENT_ALLOWED_IPS],
      wg_quick: wgQuick,
    },
    stats: {
      uptime: humanDuration(uptimeMs),
      uptime_seconds: Math.max(0, Math.floor(uptimeMs / 1000)),
      data_usage: base.data_usage,
    },
  };
}

export function toServerDto(s: VpnServer): TServer {
  return {
    id: s.id,
    location: s.location,
    city: s.city,
    country: s.country,
    country_code: s.countryCode,
    host: s.host,
    port: s.port,
    openvpn_port: s.openvpnPort,
    protocols: s.protocols as TServer['protocols'],
    status: s.status,
    load: s.load,
    latency: s.latency,
    public_key: s.publicKey,
    kind: s.kind,
    last_report_at: s.kind === 'agent' ? iso(s.lastReportAt) : null,
    created_at: iso(s.createdAt)!,
  };
}
