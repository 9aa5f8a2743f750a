import { defineModule, type ModuleManifest } from '../../kit/module.js';
import { ApiKey } from './api-key.entity.js';
import {
  API_KEYS_ORGANIZATION_ROWS,
  MikroOrmApiKeysRepository,
  type ApiKeysRepository,
} from './api-keys.repository.js';
import { apiKeysRouter } from './api-keys.router.js';
import { Migration20261124000020_api_keys } from './migrations/Migration20261124000020_api_keys.js';

/** What api-keys keeps per process (`deps.modules.apiKeys`). */
export interface ApiKeysRuntime {
  /** Every read and write of the module (api-keys.repository.ts). */
  readonly repository: ApiKeysRepository;
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    apiKeys: ApiKeysRuntime;
  }
}

/**
 * API keys (docs/api-keys.md, "API keys"). The keys are managed here; a key is authenticated on the access core's hot path
 * (access/actor.ts) and its `last_used_at` is written with the usage counters (limits/api-usage.ts).
 */
// Typed by its name and runtime (not inferred): server/modules.ts checks them against `ModuleRuntimes` above.
export const apiKeysModule: ModuleManifest<'apiKeys', ApiKeysRuntime> = defineModule({
  name: 'apiKeys',
  router: apiKeysRouter,
  create: (): ApiKeysRuntime => ({ repository: new MikroOrmApiKeysRepository() }),
  entities: [ApiKey],
  migrations: [{ name: 'Migration20261124000020_api_keys', class: Migration20261124000020_api_keys }],
  // Its table, named from the entity (api-keys.repository.ts).
  organizationRows: API_KEYS_ORGANIZATION_ROWS,
  notOwnedByUser: {
    ApiKey:
      'a credential that acts as its creator: revoked when the creator is deleted, never handed to someone else',
  },
});
