import { defineModule } from '../../kit/module.js';
import { ApiKey } from './api-key.entity.js';
import { apiKeysRouter } from './api-keys.router.js';
import { Migration20261124000020_api_keys } from './migrations/Migration20261124000020_api_keys.js';

/**
 * API keys (docs/api-keys.md, "API keys"). The keys are managed here; a key is authenticated on the access core's hot path
 * (access/actor.ts) and its `last_used_at` is written with the usage counters (access/api-usage.ts).
 */
export const apiKeysModule = defineModule({
  name: 'apiKeys',
  router: apiKeysRouter,
  entities: [ApiKey],
  migrations: [{ name: 'Migration20261124000020_api_keys', class: Migration20261124000020_api_keys }],
  organizationRows: { remove: [{ table: 'api_keys' }] },
  notOwnedByUser: {
    ApiKey:
      'a credential that acts as its creator: revoked when the creator is deleted, never handed to someone else',
  },
});
