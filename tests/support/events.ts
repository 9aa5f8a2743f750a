import { z } from 'zod';
import { defineEvent, type EventDefinition } from '../../server/events/define-event.js';
import type { EventType } from '../../server/events/event-types.js';

/**
 * An event definition whose payload may be any object: for tests of the outbox and the deliveries themselves, which
 * send markers rather than a resource view.
 */
export function looseEvent(
  type: EventType,
  scope: 'organization' | 'platform' = 'organization',
): EventDefinition<Record<string, unknown>> {
  return defineEvent(type, z.looseObject({}), { description: 'test event', scope });
}
