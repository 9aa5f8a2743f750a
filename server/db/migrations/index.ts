import { Migration20261121000001_foundation } from './Migration20261121000001_foundation.js';
import { Migration20261121000005_api_usage } from './Migration20261121000005_api_usage.js';
import { Migration20261121000010_users } from './Migration20261121000010_users.js';
import { Migration20261121000030_vpn } from './Migration20261121000030_vpn.js';
import { Migration20261121000020_webhooks } from './Migration20261121000020_webhooks.js';

/** Every migration, in order. Listed explicitly so that no file-system discovery is needed at start. */
export const migrationsList = [
  { name: 'Migration20261121000001_foundation', class: Migration20261121000001_foundation },
  { name: 'Migration20261121000005_api_usage', class: Migration20261121000005_api_usage },
  { name: 'Migration20261121000010_users', class: Migration20261121000010_users },
  { name: 'Migration20261121000020_webhooks', class: Migration20261121000020_webhooks },
  { name: 'Migration20261121000030_vpn', class: Migration20261121000030_vpn },
];
