import { defineEntity, p } from '@mikro-orm/core';

/**
 * The transactional outbox: written in the same transaction as the change that caused it, relayed after commit
 * (see outbox.ts). `organizationId` is null for platform events that concern every organization
 * (`vpn.server.created`/`.deleted`, see recordEventForAllOrganizations).
 */
export const EventSchema = defineEntity({
  name: 'Event',
  tableName: 'events',
  properties: {
    id: p.string().primary().length(64),
    organizationId: p.string().length(64).nullable().index(),
    type: p.string().length(64),
    /** `{ object }`. Stored as `json` (not `jsonb`) so the object keeps the key order the API shows. */
    data: p.json<Record<string, unknown>>().columnType('json'),
    createdAt: p.datetime(3).columnType('timestamptz(3)'),
    dispatchedAt: p.datetime(3).nullable().columnType('timestamptz(3)').index(),
  },
});
export class Event extends EventSchema.class {}
EventSchema.setClass(Event);
