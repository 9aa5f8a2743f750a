import { defineJob, noPayload } from '../../kit/jobs.js';
import { dropExpiredSecrets, purgeOldDeliveries } from './webhook-retention.js';

/**
 * Drops previous secrets whose rotation overlap has ended: sent by a rotation for its expiry, and hourly as a safety
 * net. Signing already ignores an expired previous secret, so the job only clears it from storage.
 */
export const dropExpiredSecretsJob = defineJob(
  'webhooks.drop-expired-secrets',
  async (deps) => {
    const n = await dropExpiredSecrets(deps);
    if (n > 0) deps.log.info({ webhooks: n }, 'dropped expired previous webhook secrets');
  },
  { cron: '7 * * * *', payload: noPayload },
);

/** Deliveries older than 30 days are removed (docs/webhooks.md, "Webhooks"). */
export const purgeDeliveriesJob = defineJob(
  'webhooks.purge-deliveries',
  async (deps) => {
    const n = await purgeOldDeliveries(deps);
    if (n > 0) deps.log.info({ purged: n }, 'purged webhook deliveries older than 30 days');
  },
  { cron: '41 * * * *', payload: noPayload },
);
