import { defineJob } from '../../kit/jobs.js';
import { purgeExpiredSessions } from './auth.service.js';

/** Deletes login sessions that expired or were revoked more than a day ago. */
export const purgeExpiredSessionsJob = defineJob(
  'auth.purge-expired-sessions',
  async (deps) => {
    const n = await purgeExpiredSessions(deps);
    if (n > 0) deps.log.info({ purged: n }, 'purged expired login sessions');
  },
  { cron: '17 * * * *' },
);
