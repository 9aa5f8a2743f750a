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
  indexes: [
    // A webhook's deliveries, newest first.
    // Written as SQL: the ORM reads a descending `id` after a column named `…_id` back as ascending, so it
    // compares such an index by name only; tests/db/schema-drift.test.ts compares its definition.
    {
      name: 'webhook_deliveries_webhook_id_index',
      expression:
        'create index "webhook_deliveries_webhook_id_index" on "webhook_deliveries" ("webhook_id", "created_at" desc, "id" desc)',
    },
    // The attempt queue.
    { name: 'webhook_deliveries_due_index', properties: ['nextAttemptAt'], where: { status: 'pending' } },
    // The order in which due deliveries are claimed.
    { name: 'webhook_deliveries_fair_index', properties: ['fairAt'], where: { status: 'pending' } },
    // The retention purge.
    { name: 'webhook_deliveries_created_at_index', properties: ['createdAt'] },
  ],
  // One delivery per event and webhook from the fan-out, however many relays see the event; redeliveries are more.
  uniques: [
    {
      name: 'webhook_deliveries_event_webhook_unique',
      properties: ['eventId', 'webhook'],
      where: { redeliveryOf: null },
    },
  ],
  properties: {
    webhook: () => p.manyToOne(Webhook).deleteRule('cascade'),
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
    /**
     * Claim order among due deliveries: the due time for fan-out and retries; a recovered backlog is spread over
     * later values, so that other webhooks' fresh deliveries are claimed before most of it (delivery-worker.ts).
     */
    fairAt: p.datetime(3).columnType('timestamptz(3)'),
    /** The delivery that this one sends again (redeliver, recover), or null. */
    redeliveryOf: p.string().length(64).nullable(),
    /** When `recover` queued a new delivery for this failed one (each is recovered at most once). */
    recoveredAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class WebhookDelivery extends WebhookDeliverySchema.class {}
WebhookDeliverySchema.setClass(WebhookDelivery);
