import { defineEntity, p } from '@mikro-orm/core';

/** The transactional outbox: written in the same transaction as the change that caused it. */
export const EventSchema = defineEntity({
  name: 'Event',
  tableName: 'events',
  properties: {
    id: p.string().primary().length(64),
    organizationId: p.string().length(64).index(),
    type: p.string().length(64),
    data: p.json<Record<string, unknown>>(),
    createdAt: p.datetime(3).columnType('timestamptz(3)'),
    dispatchedAt: p.datetime(3).nullable().columnType('timestamptz(3)').index(),
  },
});
export class Event extends EventSchema.class {}
EventSchema.setClass(Event);
