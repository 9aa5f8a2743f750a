import { runtimeOf } from '../../kit/runtime.js';
import type { AppDeps } from '../../kit/deps.js';
import { defineModule, type ModuleManifest, type RunningWorker } from '../../kit/module.js';
import type { BillingDriver } from './billing.driver.js';
import { BILLING_EVENTS } from './billing.events.js';
import { BILLING_TABLES, MikroOrmBillingRepository, type BillingRepository } from './billing.repository.js';
import { BILLING_SCHEDULER, BillingScheduler, billingRunDueJob } from './billing.jobs.js';
import { billingRouter } from './billing.router.js';
import { invoiceDocumentRoutes } from './invoice-documents.js';
import { Invoice } from './invoice.entity.js';
import { Migration20261121000060_billing } from './migrations/Migration20261121000060_billing.js';
import { PaymentMethod } from './payment-method.entity.js';
import { Subscription } from './subscription.entity.js';
import { createSubscription } from './subscription.service.js';
import { cancelForDeletion } from './renewals.js';
import { SimulatedBillingDriver } from './simulated-billing.driver.js';

/** What billing keeps per process (`deps.modules.billing`). */
export interface BillingRuntime {
  /** Every read and write of the module's tables (billing.repository.ts). */
  readonly repository: BillingRepository;
  /** The card processor. */
  readonly driver: BillingDriver;
  /** Queues the renewals when they fall due; nudged by a change that sets a due time (subscription.service.ts). */
  readonly scheduler: BillingScheduler;
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    billing: BillingRuntime;
  }
}

/** Plans, the subscription, payment methods, invoices, renewals and dunning, usage (docs/billing.md, "Billing"). */
// Typed by its name and runtime (not inferred): server/modules.ts checks them against `ModuleRuntimes` above.
export const billingModule: ModuleManifest<'billing', BillingRuntime> = defineModule({
  name: 'billing',
  router: billingRouter,
  create: (deps: AppDeps): BillingRuntime => ({
    repository: new MikroOrmBillingRepository(deps.db),
    // The simulated processor is the only one there is (docs/billing.md, "Billing").
    driver: new SimulatedBillingDriver(),
    scheduler: new BillingScheduler(deps),
  }),
  entities: [Subscription, PaymentMethod, Invoice],
  migrations: [{ name: 'Migration20261121000060_billing', class: Migration20261121000060_billing }],
  jobs: [billingRunDueJob],
  workers: [
    {
      name: BILLING_SCHEDULER,
      async start(deps: AppDeps): Promise<RunningWorker> {
        const scheduler = runtimeOf(deps, 'billing').scheduler;
        scheduler.start();
        return scheduler;
      },
    },
  ],
  events: BILLING_EVENTS,
  onOrganizationCreated: createSubscription,
  onOrganizationDeleted: cancelForDeletion,
  // Its tables, named from the entities (billing.repository.ts).
  organizationRows: {
    remove: [
      { table: BILLING_TABLES.invoices },
      { table: BILLING_TABLES.paymentMethods },
      { table: BILLING_TABLES.subscriptions },
    ],
  },
  httpRoutes: invoiceDocumentRoutes,
});
