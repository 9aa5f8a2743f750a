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

/** The name of the delivery worker's entry in the manifest; the worker is `runtimeOf(deps, 'webhooks').deliveryWorker`. */
export const DELIVERY_WORKER = 'webhooks.deliveries';

/** Deliveries are kept this many days (docs/webhooks.md, "Webhooks"); `recover` reaches as far back. */
export const DELIVERY_RETENTION_DAYS = 30;

/**
 * `fair_at` step between the deliveries of one recovery: their claim order, not their due time (all are due at
 * once). Fresh deliveries of other webhooks are ordered before the part of a backlog not yet reached at this pace.
 */
export const RECOVERY_SPACING_MS = 5;
