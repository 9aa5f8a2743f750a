import { defineModule } from '../../kit/module.js';
import { purgeExpiredSessionsJob } from './auth.jobs.js';
import { authRouter } from './auth.router.js';

/** Sign-in, tokens and sign-up, on the identity entities of the core (server/access). */
export const authModule = defineModule({
  name: 'auth',
  router: authRouter,
  jobs: [purgeExpiredSessionsJob],
});
