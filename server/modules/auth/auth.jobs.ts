import { z } from 'zod';
import { defineJob, noPayload } from '../../kit/jobs.js';
import { purgeExpiredSessions } from './auth.service.js';
import { sendPasswordReset } from './password-reset-mail.js';
import { purgeExpiredSso } from './sso-sign-in.service.js';
import { purgeLoginChallenges } from './two-factor.service.js';

/**
 * Deletes login sessions that expired or were revoked more than a day ago, and the expired rows of sign-ins (two-factor
 * challenges, single sign-ons).
 */
export const purgeExpiredSessionsJob = defineJob(
  'auth.purge-expired-sessions',
  async (deps) => {
    const n = await purgeExpiredSessions(deps);
    const c = await purgeLoginChallenges(deps, deps.clock.now());
    // Single sign-ons not finished, codes not exchanged, SAML assertions past their NotOnOrAfter (docs/sso.md).
    const sso = await purgeExpiredSso(deps, deps.clock.now());
    if (n > 0 || c > 0 || sso > 0)
      deps.log.info({ purged: n, challenges: c, sso }, 'purged expired login sessions');
  },
  { cron: '17 * * * *', payload: noPayload },
);

/** Looks the account of a reset request up and mails it the link (docs/accounts-and-sessions.md, "Accounts and sessions"). */
export const sendPasswordResetJob = defineJob(
  'auth.send-password-reset',
  (deps, data) => sendPasswordReset(deps, data.email),
  { payload: z.object({ email: z.string().min(1) }) },
);
