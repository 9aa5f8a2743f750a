import type { AppDeps } from '../../kit/deps.js';
import { defineModule } from '../../kit/module.js';
import { workerOf } from '../../kit/runtime.js';
import { fanOutToWebhooks } from './delivery-fanout.js';
import { DeliveryWorker } from './delivery-worker.js';
import { Migration20261121000020_webhooks } from './migrations/Migration20261121000020_webhooks.js';
import { Migration20261124000020_webhooks_operators } from './migrations/Migration20261124000020_webhooks_operators.js';
import { WebhookDelivery } from './webhook-delivery.entity.js';
import { Webhook } from './webhook.entity.js';
import { DELIVERY_WORKER } from './webhooks.constants.js';
import { dropExpiredSecretsJob, purgeDeliveriesJob } from './webhooks.jobs.js';
import { webhooksRouter } from './webhooks.router.js';
import { encryptClearWebhookSecrets } from './webhook-secrets.js';

export const webhooksModule = defineModule({
  name: 'webhooks',
  router: webhooksRouter,
  entities: [Webhook, WebhookDelivery],
  migrations: [
    { name: 'Migration20261121000020_webhooks', class: Migration20261121000020_webhooks },
    {
      name: 'Migration20261124000020_webhooks_operators',
      class: Migration20261124000020_webhooks_operators,
    },
  ],
  jobs: [dropExpiredSecretsJob, purgeDeliveriesJob],
  workers: [
    {
      name: DELIVERY_WORKER,
      async start(deps: AppDeps) {
        const worker = new DeliveryWorker(deps);
        worker.start();
        return worker;
      },
    },
  ],
  // Every committed event becomes one delivery per subscribed webhook, written in the relay's transaction; the
  // delivery worker is woken right after.
  // Webhook deliveries of the period, for the usage report.
  usageReport: {
    metrics: ['api.webhook_deliveries'],
    async report(em, organizationId, period) {
      const n = await em.count(WebhookDelivery, {
        organizationId,
        createdAt: { $gte: period.start, $lt: period.end },
      });
      return { 'api.webhook_deliveries': n };
    },
  },
  encryptAtRest: encryptClearWebhookSecrets,
  organizationRows: {
    remove: [{ table: 'webhook_deliveries' }, { table: 'webhooks' }],
    // The events the deletion caused (vpn.disconnected, the final invoice) still reach the organization's
    // webhooks: removal waits for the first attempt of each delivery (retries are not waited for).
    async busy(em, organizationId) {
      const rows = await em.execute<{ n: number }[]>(
        `select count(*)::int as n from "webhook_deliveries"
          where "organization_id" = ? and "status" = 'pending' and "attempts" = 0`,
        [organizationId],
      );
      return Number(rows[0]?.n ?? 0) > 0;
    },
  },
  outboxConsumers: [
    {
      name: 'webhooks.fan-out',
      handle: fanOutToWebhooks,
      afterCommit: (deps) => workerOf<DeliveryWorker>(deps, DELIVERY_WORKER)?.nudge(),
    },
  ],
});
