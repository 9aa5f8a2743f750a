import { coreModule } from './kit/core.module.js';
import type { ModuleManifest, RuntimesOf } from './kit/module.js';
import { apiKeysModule } from './modules/api-keys/api-keys.module.js';
import { auditModule } from './modules/audit/audit.module.js';
import { authModule } from './modules/auth/auth.module.js';
import { hostingModule } from './modules/hosting/hosting.module.js';
import { databasesModule } from './modules/databases/databases.module.js';
import { billingModule } from './modules/billing/billing.module.js';
import { organizationModule } from './modules/organization/organization.module.js';
import { usersModule } from './modules/users/users.module.js';
import { vpnModule } from './modules/vpn/vpn.module.js';
import { webhooksModule } from './modules/webhooks/webhooks.module.js';

/**
 * Every module of the API (docs/adding-a-module.md). The ORM's entities and migrations, the job queue's jobs, the
 * workers, the event catalogue, the owned resources and the plan-feature counters all derive from this list. The
 * core comes last: its outbox relay starts after the workers that consume what it relays.
 */
const list = [
  authModule,
  usersModule,
  vpnModule,
  databasesModule,
  webhooksModule,
  hostingModule,
  auditModule,
  billingModule,
  organizationModule,
  apiKeysModule,
  coreModule,
] as const;
export const modules: readonly ModuleManifest[] = list;

/**
 * What the modules build per process (`create` in their manifests), by module name: the type of `deps.modules`
 * (server/kit/deps.ts). A module that declares `create` adds its key.
 */
export type ModuleRuntimes = RuntimesOf<typeof list>;
