/** Location codes of VPN servers (README, "VPN", the platform's region codes). */
export const VPN_LOCATIONS = [
  'us-east',
  'us-west',
  'ca-central',
  'sa-east',
  'eu-west',
  'eu-central',
  'ap-southeast',
  'ap-northeast',
] as const;
export type VpnLocation = (typeof VPN_LOCATIONS)[number];

export const VPN_PROTOCOLS = ['wireguard', 'openvpn'] as const;
export type VpnProtocol = (typeof VPN_PROTOCOLS)[number];

export const CONNECTION_STATUSES = ['connecting', 'active', 'inactive', 'error'] as const;
export type ConnectionStatus = (typeof CONNECTION_STATUSES)[number];

export const SERVER_STATUSES = ['online', 'offline', 'maintenance'] as const;
export type ServerStatus = (typeof SERVER_STATUSES)[number];

export const DEFAULT_WIREGUARD_PORT = 51820;
export const DEFAULT_OPENVPN_PORT = 1194;
