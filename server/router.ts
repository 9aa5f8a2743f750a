import { authRouter } from './modules/auth/auth.router.js';
import { router } from './trpc/init.js';

/** The whole API. The client SDK imports this type only. */
export const appRouter = router({
  auth: authRouter,
});

export type AppRouter = typeof appRouter;
