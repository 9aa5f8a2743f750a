import { router } from '../../trpc/init.js';
import { requireRole } from '../../trpc/procedures.js';
import {
  ZCreateWebhookInput,
  ZDeleteWebhookOutput,
  ZListDeliveriesInput,
  ZListDeliveriesOutput,
  ZListWebhooksOutput,
  ZRecoverInput,
  ZRecoverOutput,
  ZRedeliverInput,
  ZRedeliverOutput,
  ZRotateSecretInput,
  ZRotateSecretOutput,
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
        description:
          'The webhook (its secret masked, `whsec_****abcd`) with its delivery statistics (successful, failed, ' +
          'last 30 days) and the time of its last delivery.',
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
          'Only the fields sent change. `active: true` also re-enables a webhook that was disabled (by a 410, or ' +
          'after every attempt failed for `WEBHOOK_DISABLE_AFTER`).',
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
        description:
          'Nothing more is delivered to it, pending retries included; its deliveries are deleted with it.',
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
          'single attempt (bounded by the delivery timeout). Test deliveries are not retried. They are signed like ' +
          'real events but marked: the body has a top-level `"test": true` (real events have no `test` field) and ' +
          'the request the header `X-VPN-Test: true`, also when redelivered. Receivers should ignore them.',
      },
      // The attempt is an outbound HTTP call: no transaction is held open across it.
      idempotency: 'after-commit',
    })
    .input(ZTestWebhookInput)
    .output(ZTestWebhookOutput)
    .mutation(({ ctx, input }) => webhooks.testWebhook(ctx, input)),

  redeliver: webhookProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/webhooks/{id}/deliveries/{delivery_id}/redeliver',
        tags,
        summary: 'Send a delivery again',
        description:
          'Queues a new delivery (`del_…`) of the same event: the same `evt_` id (`webhook-id`) and the same body ' +
          'bytes, attempted at once and retried on the schedule like any other, through the same queue and address ' +
          'checks. Any delivery of the webhook can be sent again, whatever its status. The webhook must be `active` ' +
          '(409 otherwise).',
      },
      errors: { CONFLICT: 'The webhook is not `active`' },
      successStatus: 202,
    })
    .input(ZRedeliverInput)
    .output(ZRedeliverOutput)
    .mutation(({ ctx, input }) => webhooks.redeliver(ctx, input)),

  recover: webhookProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/webhooks/{id}/recover',
        tags,
        summary: 'Send again every failed delivery of a window',
        description:
          'Queues a new delivery for every `failed` delivery of this webhook created between `since` and `until` ' +
          '(default now), at most 30 days back (older `since`, or `until` before `since` → 400). The originals stay ' +
          '`failed`; each is recovered at most once, so recovering the same window again queues only what failed ' +
          'since. The new deliveries keep their event id and body and go through the delivery queue behind other ' +
          "webhooks' fresh deliveries, so a large recovery never delays them. The webhook must be `active` (409 " +
          'otherwise).',
      },
      errors: { CONFLICT: 'The webhook is not `active`' },
      successStatus: 202,
    })
    .input(ZRecoverInput)
    .output(ZRecoverOutput)
    .mutation(({ ctx, input }) => webhooks.recover(ctx, input)),

  rotateSecret: webhookProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/webhooks/{id}/rotate-secret',
        tags,
        summary: 'Rotate the signing secret with an overlap',
        description:
          'Returns a new secret, shown in this response only. Until the replaced secret expires ' +
          '(`expires_in_hours`, default 24, at most 168), deliveries carry `X-VPN-Signature` keyed by the new secret, ' +
          '`X-VPN-Signature-Previous` keyed by the old one, and both in `webhook-signature` (`v1,<new> v1,<old>`), so ' +
          'a receiver verifies with either and can switch at any moment. `expires_in_hours: 0`, or a further ' +
          'rotation, drops the old secret at once: one previous secret at most, never shown again.',
      },
    })
    .input(ZRotateSecretInput)
    .output(ZRotateSecretOutput)
    .mutation(({ ctx, input }) => webhooks.rotateSecret(ctx, input)),
});
