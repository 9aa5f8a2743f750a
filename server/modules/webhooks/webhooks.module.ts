import { runtimeOf } from '../../kit/runtime.js';
import type { Config } from '../../config.js';
import type { AppDeps } from '../../kit/deps.js';
import { defineModule, type ModuleManifest, type RunningWorker } from '../../kit/module.js';
import { WebhookHttpClient } from './delivery-attempt.js';
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
import {
  countDeliveriesIn,
  MikroOrmWebhooksRepository,
  WEBHOOKS_ORGANIZATION_ROWS,
  WEBHOOKS_TABLES,
  type WebhooksRepository,
} from './webhooks.repository.js';

/** What webhooks keep per process (`deps.modules.webhooks`). */
export interface WebhooksRuntime {
  /** Every read and write of the module's tables (webhooks.repository.ts). */
  readonly repository: WebhooksRepository;
  /** Sends the deliveries; nudged after a commit that queued some, told of secret rotations (webhooks.service.ts). */
  readonly deliveryWorker: DeliveryWorker;
  /** The outbound HTTP client of the attempts (delivery-attempt.ts). */
  readonly http: WebhookHttpClient;
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    webhooks: WebhooksRuntime;
  }
}

// Typed by its name and runtime (not inferred): server/modules.ts checks them against `ModuleRuntimes` above.
export const webhooksModule: ModuleManifest<'webhooks', WebhooksRuntime> = defineModule({
  name: 'webhooks',
  router: webhooksRouter,
  create: (deps: AppDeps, config: Config): WebhooksRuntime => ({
    repository: new MikroOrmWebhooksRepository(deps.db),
    deliveryWorker: new DeliveryWorker(deps),
    http: new WebhookHttpClient(config.webhook),
  }),
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
      async start(deps: AppDeps): Promise<RunningWorker> {
        const worker = runtimeOf(deps, 'webhooks').deliveryWorker;
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
      const n = await countDeliveriesIn(em, organizationId, period);
      return { 'api.webhook_deliveries': n };
    },
  },
  encryptAtRest: encryptClearWebhookSecrets,
  atRest: [
    { table: WEBHOOKS_TABLES.webhooks, column: 'secret', key: 'secrets' },
    { table: WEBHOOKS_TABLES.webhooks, column: 'previous_secret', key: 'secrets' },
  ],
  // Its tables, named from the entities; removal waits for the first attempts (webhooks.repository.ts).
  organizationRows: WEBHOOKS_ORGANIZATION_ROWS,
  outboxConsumers: [
    {
      name: 'webhooks.fan-out',
      handle: fanOutToWebhooks,
      afterCommit: (deps) => runtimeOf(deps, 'webhooks').deliveryWorker.nudge(),
    },
  ],
});
