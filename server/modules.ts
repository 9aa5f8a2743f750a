import { coreModule } from './kit/core.module.js';
import type { ModuleRuntimes } from './kit/deps.js';
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
 * Each module adds its key to `ModuleRuntimes` (server/kit/deps.ts, the type of `deps.modules`) where it defines its
 * runtime. This does not compile unless those keys and types are exactly what the manifests' `create` build: a
 * module that declares `create` without its key, or a key without `create`, is a type error here.
 */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const runtimesMatchManifests: Same<RuntimesOf<typeof list>, ModuleRuntimes> = true;
void runtimesMatchManifests;
