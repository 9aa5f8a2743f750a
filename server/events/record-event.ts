import type { Em } from '../db/orm.js';
import { newId } from '../lib/ids.js';
import { Event } from './event.entity.js';
import type { EventType } from './event-types.js';

/**
 * Records an event in the caller's unit of work, so it commits (or rolls back) with the change that caused it:
 * the transactional outbox of conventions §8. `object` is the resource as the API shows it.
 */
export function recordEvent(
  em: Em,
  type: EventType,
  object: Record<string, unknown>,
  organizationId: string,
  now: Date = new Date(),
): Event {
  return em.create(Event, {
    id: newId('evt'),
    organizationId,
    type,
    data: { object },
    createdAt: now,
    dispatchedAt: null,
  });
}
