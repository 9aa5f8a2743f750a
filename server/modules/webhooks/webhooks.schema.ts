import { z } from 'zod';
import { EVENT_TYPES } from '../../events/event-types.js';
import { cursorQueryShape, cursorResponse } from '../../lib/pagination.js';
import { okResponse, zPathId } from '../../lib/schema.js';
import {
  DELIVERY_EVENT_TYPES,
  DELIVERY_STATUSES,
  TEST_EVENT_TYPE,
  WEBHOOK_STATUSES,
} from './webhooks.constants.js';

const ZId = zPathId('wh', 'Webhook');

// ---------- inputs ----------

const ZUrl = z
  .string()
  .trim()
  .min(1)
  .max(2048)
  .meta({
    format: 'uri',
    description:
      'HTTPS endpoint that receives the events. Only hosts that are and resolve to global unicast addresses are ' +
      'accepted: loopback, private, link-local, CGNAT, multicast, reserved, documentation or cloud metadata ' +
      'addresses, IPv6 forms that carry one (IPv4-compatible `::/96`, 6to4, Teredo, NAT64 of a refused IPv4), ' +
      'site-local and unique-local IPv6, and URLs with credentials, are refused.',
  });

const ZEvents = z
  .array(z.enum(EVENT_TYPES))
  .min(1)
  .max(EVENT_TYPES.length * 2)
  .describe('Event names to receive (see Events); duplicates are ignored');

const ZDescription = z.string().trim().max(500).nullable().describe('Free text, up to 500 characters');

export const ZCreateWebhookInput = z.strictObject({
  url: ZUrl,
  events: ZEvents,
  description: ZDescription.optional(),
  active: z.boolean().optional().describe('Receive events (default true); false pauses the webhook'),
});
export type TCreateWebhookInput = z.infer<typeof ZCreateWebhookInput>;

export const ZUpdateWebhookInput = z.strictObject({
  id: ZId,
  url: ZUrl.optional(),
  events: ZEvents.optional(),
  description: ZDescription.optional(),
  active: z
    .boolean()
    .optional()
    .describe(
      'false pauses the webhook (`inactive`); true makes it `active` again, also after a 410 disabled it',
    ),
});
export type TUpdateWebhookInput = z.infer<typeof ZUpdateWebhookInput>;

export const ZWebhookIdInput = z.object({ id: ZId });
export type TWebhookIdInput = z.infer<typeof ZWebhookIdInput>;

export const ZListDeliveriesInput = z.object({
  id: ZId,
  ...cursorQueryShape,
  status: z.enum(DELIVERY_STATUSES).optional().describe('Only deliveries in this state'),
  event_type: z.enum(DELIVERY_EVENT_TYPES).optional().describe('Only deliveries of this event type'),
});
export type TListDeliveriesInput = z.infer<typeof ZListDeliveriesInput>;

export const ZTestWebhookInput = z.strictObject({
  id: ZId,
  event_type: z
    .enum(DELIVERY_EVENT_TYPES)
    .default(TEST_EVENT_TYPE)
    .describe('`type` of the test event (default `webhook.test`); any event name is allowed'),
  custom_data: z
    .record(z.string(), z.unknown())
    .optional()
    .describe("Sent as the event's `data.object` (default `{}`)"),
});
export type TTestWebhookInput = z.infer<typeof ZTestWebhookInput>;

const ZDateTime = (what: string) =>
  z.iso
    .datetime({ offset: true, message: 'Must be an ISO 8601 date-time, e.g. 2026-11-21T08:36:00.000Z' })
    .describe(what);

export const ZRedeliverInput = z.strictObject({
  id: ZId,
  delivery_id: zPathId('del', 'Delivery'),
});
export type TRedeliverInput = z.infer<typeof ZRedeliverInput>;

export const ZRecoverInput = z.strictObject({
  id: ZId,
  since: ZDateTime('Start of the window (inclusive): at most 30 days ago'),
  until: ZDateTime('End of the window (inclusive; default now): not before `since`').optional(),
});
export type TRecoverInput = z.infer<typeof ZRecoverInput>;

export const ZRotateSecretInput = z.strictObject({
  id: ZId,
  expires_in_hours: z
    .number()
    .int('Whole hours only')
    .min(0)
    .max(168)
    .default(24)
    .describe(
      'How long the replaced secret keeps signing beside the new one, 0 to 168 whole hours (default 24); 0 drops it at once',
    ),
});
export type TRotateSecretInput = z.infer<typeof ZRotateSecretInput>;

// ---------- outputs ----------

const ZTimestamp = z.string().describe('ISO 8601 UTC with milliseconds');
const ZNullableTimestamp = z.string().nullable().describe('ISO 8601 UTC with milliseconds, or null');

const webhookFields = {
  id: z.string().describe('`wh_…`'),
  url: z.string().meta({ format: 'uri', description: 'The endpoint that receives the events' }),
  events: z.array(z.enum(EVENT_TYPES)).describe('Subscribed event names'),
  status: z
    .enum(WEBHOOK_STATUSES)
    .describe(
      '`active`; `inactive` when paused; `disabled` after the receiver answered 410 Gone, or after every attempt ' +
        'failed for `WEBHOOK_DISABLE_AFTER` (default 5 days)',
    ),
  active: z.boolean().describe('True when `status` is `active`'),
  description: z.string().nullable(),
  secret: z
    .string()
    .describe(
      'Signing secret, `whsec_…`: in full in the create response only, masked (`whsec_****abcd`) afterwards',
    ),
  previous_secret_expires_at: ZNullableTimestamp.describe(
    'While a rotation overlaps: until when deliveries are also signed with the previous secret ' +
      '(`X-VPN-Signature-Previous`, second `webhook-signature`); null otherwise. That secret is never shown.',
  ),
  created_at: ZTimestamp,
  updated_at: ZTimestamp,
  last_delivery: ZNullableTimestamp.describe('Time of the latest delivery attempt, or null'),
};

export const ZWebhookListStats = z
  .object({
    successful: z.number().int().describe('Deliveries that succeeded'),
    failed: z.number().int().describe('Deliveries that failed for good'),
    last_30_days: z
      .number()
      .int()
      .describe('Deliveries created in the last 30 days, in any state (deliveries are kept 30 days)'),
  })
  .meta({ id: 'WebhookListStats' });

export const ZWebhookDetailStats = z
  .object({
    total_deliveries: z.number().int(),
    successful_deliveries: z.number().int(),
    failed_deliveries: z.number().int(),
    last_successful_delivery: ZNullableTimestamp,
    last_failed_delivery: ZNullableTimestamp.describe(
      'Time of the last attempt of the latest failed delivery',
    ),
    average_response_time_ms: z
      .number()
      .int()
      .nullable()
      .describe('Mean response time of the attempts that got a response, or null'),
  })
  .meta({ id: 'WebhookDetailStats' });

export const ZWebhookSummary = z
  .object({ ...webhookFields, delivery_stats: ZWebhookListStats })
  .meta({ id: 'WebhookSummary' });
export type TWebhookSummary = z.infer<typeof ZWebhookSummary>;

export const ZWebhookDetail = z
  .object({ ...webhookFields, delivery_stats: ZWebhookDetailStats })
  .meta({ id: 'WebhookDetail' });
export type TWebhookDetail = z.infer<typeof ZWebhookDetail>;

export const ZDelivery = z
  .object({
    id: z.string().describe('`del_…`'),
    webhook_id: z.string(),
    event_id: z.string().describe('`evt_…`: the `id` of the event body, the same on every attempt'),
    event_type: z
      .enum(DELIVERY_EVENT_TYPES)
      .describe(
        '`type` of the event delivered: an event name, or `webhook.test` (or the one given) for a test',
      ),
    status: z.enum(DELIVERY_STATUSES).describe('`pending` (attempts remain), `success` or `failed`'),
    attempts: z.number().int().describe('Attempts made so far'),
    response_status: z.number().int().nullable().describe('HTTP status of the latest attempt, or null'),
    response_time_ms: z.number().int().nullable().describe('Response time of the latest attempt, or null'),
    delivered_at: ZNullableTimestamp.describe('When a 2xx was received, or null'),
    last_attempt_at: ZNullableTimestamp,
    next_attempt_at: ZNullableTimestamp.describe('When the next attempt is due while `pending`, else null'),
    error: z.string().nullable().describe('Why the latest attempt failed (no response, refused address…)'),
    created_at: ZTimestamp,
    redelivery_of: z
      .string()
      .nullable()
      .describe('The delivery (`del_…`) that this one sends again (redeliver, recover), or null'),
    event_data: z.record(z.string(), z.unknown()).describe('The event body as sent'),
  })
  .meta({ id: 'WebhookDelivery' });
export type TDelivery = z.infer<typeof ZDelivery>;

export const ZListWebhooksOutput = okResponse({
  webhooks: z.array(ZWebhookSummary),
  total: z.number().int(),
});

export const ZWebhookOutput = okResponse({ webhook: ZWebhookDetail });

export const ZDeleteWebhookOutput = okResponse({
  message: z.string(),
  id: z.string(),
  webhook_id: z.string(),
});

export const ZListDeliveriesOutput = cursorResponse('deliveries', ZDelivery);

export const ZTestWebhookOutput = okResponse({
  delivery: ZDelivery.describe('The test delivery, with the outcome of its single attempt'),
});

export const ZRedeliverOutput = okResponse({
  delivery: ZDelivery.describe('The new delivery, `pending`, of the same event (same `event_id` and body)'),
});

export const ZRecoverOutput = okResponse({
  deliveries_queued: z.number().int().describe('New deliveries queued, one per failed delivery recovered'),
});

export const ZRotateSecretOutput = okResponse({
  webhook: ZWebhookDetail,
  secret: z.string().describe('The new signing secret, `whsec_…`: shown in this response only'),
});
