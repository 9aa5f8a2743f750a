import type { JobQueue } from './jobs/queue.js';
import { purgeExpiredSessions } from './modules/auth/auth.service.js';
import { defineVpnJobs } from './modules/vpn/vpn.jobs.js';
import type { AppDeps } from './trpc/context.js';

/** Every background job of every module, registered on the queue before it starts. */
export function defineJobs(jobs: JobQueue, deps: AppDeps): void {
  jobs.define({
    name: 'auth.purge-expired-sessions',
    cron: '17 * * * *',
    handler: async () => {
      const n = await purgeExpiredSessions(deps);
      if (n > 0) deps.log.info({ purged: n }, 'purged expired login sessions');
    },
  });
  defineVpnJobs(jobs, deps);
}
