import type { JobQueue } from '../../jobs/queue.js';
import type { AppDeps } from '../../trpc/context.js';
import { VPN_ACTIVATE_JOB, VPN_SAMPLE_USAGE_JOB } from './vpn.constants.js';
import { activateConnection, storeActiveUsage, type ActivateJobData } from './vpn.service.js';

/** The VPN module's background jobs (registered from server/jobs.ts). */
export function defineVpnJobs(jobs: JobQueue, deps: AppDeps): void {
  jobs.define<ActivateJobData>({
    name: VPN_ACTIVATE_JOB,
    handler: (data) => activateConnection(deps, data),
    // The handler is idempotent, so a transient database failure is simply retried.
    retryLimit: 5,
    retryDelaySeconds: 1,
    batchSize: 10,
  });
  jobs.define({
    name: VPN_SAMPLE_USAGE_JOB,
    cron: '* * * * *',
    handler: async () => {
      await storeActiveUsage(deps);
    },
  });
}
