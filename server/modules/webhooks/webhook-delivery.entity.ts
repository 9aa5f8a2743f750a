import { defineEntity, p } from '@mikro-orm/core';
import { BaseSchema } from '../../db/base.entity.js';
import { DELIVERY_STATUSES } from './webhooks.constants.js';
import { Webhook } from './webhook.entity.js';

/**
 * One event for one webhook. The row is also the delivery's place in the attempt queue: `next_attempt_at` is when
 * the next attempt is due, or, while an attempt runs, when its lease expires (see delivery-worker.ts).
 */
export const WebhookDeliverySchema = defineEntity({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  extends: BaseSchema,
  properties: {
    webhook: () => p.manyToOne(Webhook).index().deleteRule('cascade'),
    organizationId: p.string().length(64),
    eventId: p.string().length(64),
    eventType: p.string().length(64),
    /** The exact bytes that are signed and sent, on every attempt. */
    payload: p.text().lazy(),
    status: p.enum(DELIVERY_STATUSES).default('pending'),
    attempts: p.integer().default(0),
    nextAttemptAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    lastAttemptAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    deliveredAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    responseStatus: p.integer().nullable(),
    responseTimeMs: p.integer().nullable(),
    lastError: p.string().length(500).nullable(),
  },
});
export class WebhookDelivery extends WebhookDeliverySchema.class {}
WebhookDeliverySchema.setClass(WebhookDelivery);
