import type { EventType } from '../../events/event-types.js';
import { iso } from '../../lib/time.js';
import type { WebhookDelivery } from './webhook-delivery.entity.js';
import { maskSecret } from './webhook-signing.js';
import type { Webhook } from './webhook.entity.js';
import type { DeliveryEventType } from './webhooks.constants.js';
import type { TDelivery, TWebhookDetail, TWebhookSummary } from './webhooks.schema.js';

/** A webhook's delivery counters, as the stats query returns them. */
export interface StatsRow {
  webhook_id: string;
  total: string | number;
  successful: string | number;
  failed: string | number;
  last_30_days: string | number;
  last_delivery: Date | string | null;
  last_successful: Date | string | null;
  last_failed: Date | string | null;
  avg_ms: string | number | null;
}

const dateOrNull = (v: Date | string | null | undefined) => (v ? new Date(v).toISOString() : null);

/** `secret`: the webhook's secret in clear (it is stored encrypted: webhook-secrets.ts). */
function baseDto(h: Webhook, stats: StatsRow | undefined, secret: string, show: 'masked' | 'full') {
  return {
    id: h.id,
    url: h.url,
    // Stored as text, written only from the validated enum of the create and update inputs.
    events: [...h.events] as EventType[],
    status: h.status,
    active: h.status === 'active',
    description: h.description ?? null,
    secret: show === 'full' ? secret : maskSecret(secret),
    previous_secret_expires_at: h.previousSecret ? iso(h.previousSecretExpiresAt) : null,
    created_at: iso(h.createdAt)!,
    updated_at: iso(h.updatedAt)!,
    last_delivery: dateOrNull(stats?.last_delivery),
  };
}

export function toWebhookSummaryDto(
  h: Webhook,
  stats: StatsRow | undefined,
  secret: string,
): TWebhookSummary {
  return {
    ...baseDto(h, stats, secret, 'masked'),
    delivery_stats: {
      successful: Number(stats?.successful ?? 0),
      failed: Number(stats?.failed ?? 0),
      last_30_days: Number(stats?.last_30_days ?? 0),
    },
  };
}

export function toWebhookDetailDto(
  h: Webhook,
  stats: StatsRow | undefined,
  secret: string,
  show: 'masked' | 'full' = 'masked',
): TWebhookDetail {
  return {
    ...baseDto(h, stats, secret, show),
    delivery_stats: {
      total_deliveries: Number(stats?.total ?? 0),
      successful_deliveries: Number(stats?.successful ?? 0),
      failed_deliveries: Number(stats?.failed ?? 0),
      last_successful_delivery: dateOrNull(stats?.last_successful),
      last_failed_delivery: dateOrNull(stats?.last_failed),
      average_response_time_ms:
        stats?.avg_ms === null || stats?.avg_ms === undefined ? null : Math.round(Number(stats.avg_ms)),
    },
  };
}

export function toDeliveryDto(d: WebhookDelivery): TDelivery {
  return {
    id: d.id,
    webhook_id: d.webhook.id,
    event_id: d.eventId,
    event_type: d.eventType as DeliveryEventType,
    status: d.status,
    attempts: d.attempts,
    response_status: d.responseStatus ?? null,
    response_time_ms: d.responseTimeMs ?? null,
    delivered_at: iso(d.deliveredAt),
    last_attempt_at: iso(d.lastAttemptAt),
    next_attempt_at: d.status === 'pending' ? iso(d.nextAttemptAt) : null,
    error: d.lastError ?? null,
    created_at: iso(d.createdAt)!,
    redelivery_of: d.redeliveryOf ?? null,
    event_data: JSON.parse(d.payload) as Record<string, unknown>,
  };
}
