import type { Em } from '../../db/orm.js';
import type { OutboxEvent } from '../../events/outbox.js';
import { newId } from '../../lib/ids.js';
import {
  activeWebhooksOf,
  activeWebhooksOfLiveOrganizations,
  insertFannedOutDeliveries,
  type SubscriberRow,
} from './webhooks.repository.js';

/** How a test delivery's body starts (docs/webhooks.md, "Webhooks"): real events start with `{"id":`. */
export const TEST_BODY_PREFIX = '{"test":true,';

/** Whether stored delivery bytes are those of a test (`POST /webhooks/:id/test`), including its redeliveries. */
export function isTestPayload(payload: string): boolean {
  return payload.startsWith(TEST_BODY_PREFIX);
}

/**
 * The event body (docs/webhooks.md, "Webhooks"), in its key order. Its bytes are stored and sent unchanged on every attempt.
 * A test delivery's body starts with `"test": true`; real events have no `test` field.
 */
export function eventBody(e: {
  id: string;
  type: string;
  createdAt: Date;
  organizationId: string;
  data: Record<string, unknown>;
  test?: boolean;
}): string {
  return JSON.stringify({
    ...(e.test ? { test: true } : {}),
    id: e.id,
    type: e.type,
    created_at: e.createdAt.toISOString(),
    organization_id: e.organizationId,
    data: e.data,
  });
}

const INSERT_CHUNK = 500;

/**
 * Outbox handler: one delivery per event and active webhook of its organization subscribed to its type (for
 * platform events, of every organization), due now. Runs in the relay's transaction; the unique (event, webhook)
 * index makes a second relay of the same event a no-op.
 */
export async function fanOutToWebhooks(em: Em, events: OutboxEvent[], now: Date): Promise<number> {
  const orgIds = [...new Set(events.map((e) => e.organizationId).filter((o): o is string => o !== null))];
  const hooks: SubscriberRow[] = [];
  if (orgIds.length > 0) hooks.push(...(await activeWebhooksOf(em, orgIds)));
  const platformTypes = [...new Set(events.filter((e) => e.organizationId === null).map((e) => e.type))];
  if (platformTypes.length > 0) {
    const seen = new Set(hooks.map((h) => h.id));
    const all = await activeWebhooksOfLiveOrganizations(em);
    hooks.push(...all.filter((h) => !seen.has(h.id)));
  }
  if (hooks.length === 0) return 0;

  const subscribed = hooks.map((h) => ({ ...h, events: new Set(parseTextArray(h.events)) }));
  const rows: unknown[][] = [];
  for (const e of events) {
    for (const h of subscribed) {
      if (!h.events.has(e.type)) continue;
      if (e.organizationId !== null && e.organizationId !== h.organization_id) continue;
      const payload = eventBody({ ...e, organizationId: h.organization_id });
      rows.push([h.id, h.organization_id, e.id, e.type, payload, now, now]);
    }
  }
  // The events come in the order they were recorded (their sequence) and share `now`: the deliveries' ids ascend
  // in that order, so that a webhook's list (newest first: time, then id) and the worker's claims (due time, then
  // id) keep it.
  const ids = rows.map(() => newId('del')).sort();
  rows.forEach((row, i) => row.unshift(ids[i], now, now));
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    await insertFannedOutDeliveries(em, rows.slice(i, i + INSERT_CHUNK));
  }
  return rows.length;
}

/** Drivers return `text[]` parsed, except in a few raw paths where it comes as the literal `{a,b}`. */
function parseTextArray(v: string[] | string): string[] {
  if (Array.isArray(v)) return v;
  return v
    .replace(/^\{|\}$/g, '')
    .split(',')
    .map((s) => s.replace(/^"|"$/g, ''))
    .filter(Boolean);
}
