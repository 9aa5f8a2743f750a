import { z } from 'zod';
import { serviceContext } from '../../kit/deps.js';
import { defineJob, noPayload } from '../../kit/jobs.js';
import { activateConnection, storeActiveUsage } from './vpn-activation.service.js';

const activateJobPayload = z.object({
  connection_id: z.string().min(1),
  /** The connection attempt it was queued for (`connectGeneration`). */
  generation: z.number().int().nonnegative(),
});
export type ActivateJobData = z.output<typeof activateJobPayload>;

/** `connecting` → `active` after the provisioning delay (or `error` if the server went away). */
export const vpnActivateJob = defineJob(
  'vpn.activate',
  (deps, data) => activateConnection(serviceContext(deps), data),
  // The handler is idempotent, so a transient database failure is simply retried.
  { retryLimit: 5, retryDelaySeconds: 1, batchSize: 10, payload: activateJobPayload },
);

/** Stores the simulated usage of every active connection, so stored totals stay recent. */
export const vpnSampleUsageJob = defineJob(
  'vpn.sample-usage',
  async (deps) => {
    await storeActiveUsage(serviceContext(deps));
  },
  { cron: '* * * * *', payload: noPayload },
);
