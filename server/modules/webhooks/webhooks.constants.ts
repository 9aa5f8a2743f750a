import { EVENT_TYPES } from '../../events/event-types.js';

export const WEBHOOK_STATUSES = ['active', 'inactive', 'disabled'] as const;
export type WebhookStatus = (typeof WEBHOOK_STATUSES)[number];

export const DELIVERY_STATUSES = ['pending', 'success', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** The default `event_type` of `POST /webhooks/:id/test`. */
export const TEST_EVENT_TYPE = 'webhook.test';
/** What a delivery may carry: every event of the catalogue, and the test event. */
export const DELIVERY_EVENT_TYPES = [...EVENT_TYPES, TEST_EVENT_TYPE] as const;
export type DeliveryEventType = (typeof DELIVERY_EVENT_TYPES)[number];

/** Webhooks per organization at most: enough for any integration, bounded fan-out per event. */
export const MAX_WEBHOOKS_PER_ORGANIZATION = 100;

/** The name of the delivery worker (tests reach it with `workerOf`). */
export const DELIVERY_WORKER = 'webhooks.deliveries';
