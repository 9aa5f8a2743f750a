import type { Em } from '../db/orm.js';
import { newId } from '../lib/ids.js';
import type { EventDefinition } from './define-event.js';
import { Event } from './event.entity.js';

/** A payload that does not match its event's declared schema is a defect of the emitting code, never sent out. */
function checkedPayload<T>(event: EventDefinition<T>, object: T): Record<string, unknown> {
  const result = event.schema.safeParse(object);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new Error(
      `event ${event.type}: the payload does not match its schema (${issue?.path.join('.') || '(root)'}: ${issue?.message})`,
    );
  }
  return object as Record<string, unknown>;
}

/**
 * Records an event in the caller's unit of work, so it commits (or rolls back) with the change that caused it:
 * the transactional outbox of docs/webhooks.md, "Webhooks". `object` is the resource as the API shows it.
 *
 * After commit the outbox relay (outbox.ts) hands it to every active webhook of `organizationId` subscribed to
 * `type`, one delivery each. Call it inside the `em.transactional` (or before the `flush`) of the change itself.
 */
export function recordEvent<T>(
  em: Em,
  event: EventDefinition<T>,
  object: NoInfer<T>,
  organizationId: string,
  now: Date,
): Event {
  if (event.scope !== 'organization') throw new Error(`event ${event.type} concerns every organization`);
  return insertEvent(em, event, object, organizationId, now);
}

/**
 * Records a platform event that concerns every organization (a VPN server added to or removed from the shared
 * catalogue: `vpn.server.created`, `vpn.server.deleted`). Same transactional rules as recordEvent: one row is
 * written now, and the relay fans it out after commit to every organization's active webhooks subscribed to
 * `type`. Each delivery's body names the receiving organization in `organization_id`; the event `id` is the same
 * for every receiver.
 */
export function recordEventForAllOrganizations<T>(
  em: Em,
  event: EventDefinition<T>,
  object: NoInfer<T>,
  now: Date,
): Event {
  if (event.scope !== 'platform') throw new Error(`event ${event.type} belongs to one organization`);
  return insertEvent(em, event, object, null, now);
}

/**
 * A catalogue event (`vpn.server.created` / `.deleted`) that concerns one organization only: a server its owner
 * registered serves that organization alone, so no other organization hears of it.
 */
export function recordPlatformEventFor<T>(
  em: Em,
  event: EventDefinition<T>,
  object: NoInfer<T>,
  organizationId: string,
  now: Date,
): Event {
  if (event.scope !== 'platform') throw new Error(`event ${event.type} is not a catalogue event`);
  return insertEvent(em, event, object, organizationId, now);
}

/** The outbox row of an event, its payload checked against the event's schema. */
function insertEvent<T>(
  em: Em,
  event: EventDefinition<T>,
  object: T,
  organizationId: string | null,
  now: Date,
): Event {
  return em.create(Event, {
    id: newId('evt'),
    organizationId,
    type: event.type,
    data: { object: checkedPayload(event, object) },
    createdAt: now,
    dispatchedAt: null,
  });
}

/** Deletes events relayed more than `keepDays` ago: the outbox is a hand-off, not an archive. */
export async function pruneDispatchedEvents(em: Em, now: Date, keepDays = 7): Promise<number> {
  return em.nativeDelete(Event, { dispatchedAt: { $lt: new Date(now.getTime() - keepDays * 86_400_000) } });
}
