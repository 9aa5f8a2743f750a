import { repositoryOf } from '../../kit/runtime.js';
import { defineJob, noPayload } from '../../kit/jobs.js';

/** The audit log keeps 365 days. */
export const purgeAuditLogJob = defineJob(
  'audit.purge',
  async (deps) => {
    const n = await repositoryOf(deps, 'audit').purgeExpired(deps.clock.now());
    if (n > 0) deps.log.info({ purged: n }, 'purged audit log entries older than 365 days');
  },
  { cron: '23 4 * * *', payload: noPayload },
);
