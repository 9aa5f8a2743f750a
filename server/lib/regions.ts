/**
 * Region codes of the platform: where VPN servers stand (docs/vpn.md, "Servers") and databases run
 * (docs/managed-databases.md).
 */
export const REGIONS = [
  'us-east',
  'us-west',
  'ca-central',
  'sa-east',
  'eu-west',
  'eu-central',
  'ap-southeast',
  'ap-northeast',
] as const;
export type Region = (typeof REGIONS)[number];
