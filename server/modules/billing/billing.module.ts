import type { AppDeps } from '../../kit/deps.js';
import { defineModule } from '../../kit/module.js';
import { BILLING_EVENTS } from './billing.events.js';
import { BILLING_SCHEDULER, BillingScheduler, billingRunDueJob } from './billing.jobs.js';
import { billingRouter } from './billing.router.js';
import { invoiceDocumentRoutes } from './invoice-documents.js';
import { Invoice } from './invoice.entity.js';
import { Migration20261121000060_billing } from './migrations/Migration20261121000060_billing.js';
import { PaymentMethod } from './payment-method.entity.js';
import { Subscription } from './subscription.entity.js';
import { createSubscription } from './subscription.service.js';
import { cancelForDeletion } from './renewals.js';

/** Plans, the subscription, payment methods, invoices, renewals and dunning, usage (README, "Billing"). */
export const billingModule = defineModule({
  name: 'billing',
  router: billingRouter,
  entities: [Subscription, PaymentMethod, Invoice],
  migrations: [{ name: 'Migration20261121000060_billing', class: Migration20261121000060_billing }],
  jobs: [billingRunDueJob],
  workers: [
    {
      name: BILLING_SCHEDULER,
      async start(deps: AppDeps) {
        const scheduler = new BillingScheduler(deps);
        scheduler.start();
        return scheduler;
      },
    },
  ],
  events: BILLING_EVENTS,
  onOrganizationCreated: createSubscription,
  onOrganizationDeleted: cancelForDeletion,
  organizationRows: {
    remove: [{ table: 'invoices' }, { table: 'payment_methods' }, { table: 'subscriptions' }],
  },
  httpRoutes: invoiceDocumentRoutes,
});
