import { router } from '../../trpc/init.js';
import { requireRole } from '../../trpc/procedures.js';
import {
  ZCreateWebhookInput,
  ZDeleteWebhookOutput,
  ZListDeliveriesInput,
  ZListDeliveriesOutput,
  ZListWebhooksOutput,
  ZTestWebhookInput,
  ZTestWebhookOutput,
  ZUpdateWebhookInput,
  ZWebhookIdInput,
  ZWebhookOutput,
} from './webhooks.schema.js';
import * as webhooks from './webhooks.service.js';

const tags = ['Webhooks'];

/** Webhooks belong to the organization and are managed by its owner and admins (docs/users-and-permissions.md). */
const webhookProcedure = requireRole('owner', 'admin');

export const webhooksRouter = router({
  list: webhookProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/webhooks',
        tags,
        summary: "List the organization's webhooks",
        description:
          'Newest first, with delivery statistics computed from the deliveries. Secrets are masked.',
      },
    })
    .input(ZWebhookIdInput.omit({ id: true }).optional())
    .output(ZListWebhooksOutput)
    .query(({ ctx }) => webhooks.listWebhooks(ctx)),

  create: webhookProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/webhooks',
        tags,
        summary: 'Register a webhook',
        description:
          'The response carries the signing secret in full, once; later responses mask it. Every delivery is ' +
          'signed with `X-VPN-Signature` (HMAC-SHA256 of the body keyed by the secret) and the Standard Webhooks ' +
          'headers `webhook-id`, `webhook-timestamp`, `webhook-signature`.',
      },
      successStatus: 201,
      location: '/webhooks/{webhook.id}',
    })
    .input(ZCreateWebhookInput)
    .output(ZWebhookOutput)
    .mutation(({ ctx, input }) => webhooks.createWebhook(ctx, input)),

  get: webhookProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/webhooks/{id}',
        tags,
        summary: 'A webhook with its delivery statistics',
      },
    })
    .input(ZWebhookIdInput)
    .output(ZWebhookOutput)
    .query(({ ctx, input }) => webhooks.getWebhook(ctx, input.id)),

  update: webhookProcedure
    .meta({
      openapi: {
        method: 'PUT',
        path: '/webhooks/{id}',
        tags,
        summary: 'Change a webhook',
        description:
          'Only the fields sent change. `active: true` also re-enables a webhook disabled by a 410.',
      },
    })
    .input(ZUpdateWebhookInput)
    .output(ZWebhookOutput)
    .mutation(({ ctx, input }) => webhooks.updateWebhook(ctx, input)),

  delete: webhookProcedure
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/webhooks/{id}',
        tags,
        summary: 'Delete a webhook and its delivery history',
      },
    })
    .input(ZWebhookIdInput)
    .output(ZDeleteWebhookOutput)
    .mutation(({ ctx, input }) => webhooks.deleteWebhook(ctx, input.id)),

  deliveries: webhookProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/webhooks/{id}/deliveries',
        tags,
        summary: "A webhook's deliveries",
        description:
          'Newest first, cursor paged (`limit`, `starting_after`), filtered by `status` and `event_type`.',
      },
    })
    .input(ZListDeliveriesInput)
    .output(ZListDeliveriesOutput)
    .query(({ ctx, input }) => webhooks.listDeliveries(ctx, input)),

  test: webhookProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/webhooks/{id}/test',
        tags,
        summary: 'Send a test event now',
        description:
          'Delivers one event of type `event_type` (default `webhook.test`) with `custom_data` as `data.object`, ' +
          'whatever the subscriptions and state of the webhook, and returns the delivery with the outcome of its ' +
          'single attempt (bounded by the delivery timeout). Test deliveries are not retried.',
      },
      // The attempt is an outbound HTTP call: no transaction is held open across it.
      idempotency: 'after-commit',
    })
    .input(ZTestWebhookInput)
    .output(ZTestWebhookOutput)
    .mutation(({ ctx, input }) => webhooks.testWebhook(ctx, input)),
});
