import { apiKeysRouter } from './modules/api-keys/api-keys.router.js';
import { auditRouter } from './modules/audit/audit.router.js';
import { authRouter } from './modules/auth/auth.router.js';
import { ssoRouter } from './modules/auth/sso.router.js';
import { hostingRouter } from './modules/hosting/hosting.router.js';
import { databasesRouter } from './modules/databases/databases.router.js';
import { billingRouter } from './modules/billing/billing.router.js';
import { organizationRouter } from './modules/organization/organization.router.js';
import { usersRouter } from './modules/users/users.router.js';
import { vpnRouter } from './modules/vpn/vpn.router.js';
import { webhooksRouter } from './modules/webhooks/webhooks.router.js';
import { router } from './trpc/init.js';
// The manifests, where each module adds its runtime to the type of `deps.modules` (server/kit/deps.ts) that the
// routers' services read: any program that compiles the routers (the client SDK's) compiles them too.
import type {} from './modules.js';

/** The whole API. The client SDK imports this type only. */
export const appRouter = router({
  auth: authRouter,
  users: usersRouter,
  vpn: vpnRouter,
  databases: databasesRouter,
  webhooks: webhooksRouter,
  hosting: hostingRouter,
  audit: auditRouter,
  billing: billingRouter,
  organization: organizationRouter,
  apiKeys: apiKeysRouter,
  sso: ssoRouter,
});

export type AppRouter = typeof appRouter;
