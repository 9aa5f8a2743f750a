import { REGIONS, type Region } from '../../lib/regions.js';

/** Location codes of VPN servers (docs/vpn.md, "Servers"): the platform's region codes. */
export const VPN_LOCATIONS = REGIONS;
export type VpnLocation = Region;

export const VPN_PROTOCOLS = ['wireguard', 'openvpn'] as const;
export type VpnProtocol = (typeof VPN_PROTOCOLS)[number];

export const CONNECTION_STATUSES = ['connecting', 'active', 'inactive', 'error'] as const;
export type ConnectionStatus = (typeof CONNECTION_STATUSES)[number];

export const SERVER_STATUSES = ['online', 'offline', 'maintenance'] as const;
export type ServerStatus = (typeof SERVER_STATUSES)[number];

export const DEFAULT_WIREGUARD_PORT = 51820;
export const DEFAULT_OPENVPN_PORT = 1194;

export const SERVER_KINDS = ['simulated', 'agent'] as const;
export type ServerKind = (typeof SERVER_KINDS)[number];

/** A connection on an agent server is `active` while its latest handshake is more recent than this. */
export const HANDSHAKE_ACTIVE_MS = 180_000;
/** How long an agent's long poll for peers may wait before it answers unchanged. */
export const AGENT_POLL_MAX_SECONDS = 25;
/** How often an agent reports (it may report more often). */
export const AGENT_REPORT_INTERVAL_SECONDS = 10;
/** The server's own tunnel address: `.1` of the client network (wireguard.ts clientAddress numbers peers from 2). */
export const AGENT_SERVER_ADDRESS = '10.64.0.1/10';
/** The client network every agent server numbers its peers in (wireguard.ts clientAddress). */
export const CLIENT_NETWORK_CIDR = '10.64.0.0/10';
