import { authRouter } from './modules/auth/auth.router.js';
import { billingRouter } from './modules/billing/billing.router.js';
import { usersRouter } from './modules/users/users.router.js';
import { vpnRouter } from './modules/vpn/vpn.router.js';
import { webhooksRouter } from './modules/webhooks/webhooks.router.js';
import { router } from './trpc/init.js';

/** The whole API. The client SDK imports this type only. */
export const appRouter = router({
  auth: authRouter,
  users: usersRouter,
  vpn: vpnRouter,
  webhooks: webhooksRouter,
  billing: billingRouter,
});

export type AppRouter = typeof appRouter;
