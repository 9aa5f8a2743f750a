import { defineEntity, p } from '@mikro-orm/core';

/**
 * The transactional outbox: written in the same transaction as the change that caused it, relayed after commit
 * (see outbox.ts). `organizationId` is null for platform events that concern every organization
 * (`vpn.server.created`/`.deleted`, see recordEventForAllOrganizations).
 */
export const EventSchema = defineEntity({
  name: 'Event',
  tableName: 'events',
  indexes: [
    { name: 'events_organization_id_index', properties: ['organizationId', 'seq'] },
    // What the relay has still to dispatch, in the order they were recorded.
    { name: 'events_undispatched_index', properties: ['seq'], where: { dispatchedAt: null } },
  ],
  triggers: [
    {
      // Other processes (a second server, an operator command) learn of new events at commit, not at their next
      // sweep. Written as the migration wrote it; the ORM compares such a trigger by name only.
      name: 'events_notify_insert',
      timing: 'after',
      events: ['insert'],
      forEach: 'statement',
      expression: `create or replace function "events_notify"() returns trigger language plpgsql as $$
        begin
          perform pg_notify('platform_events', '');
          return null;
        end
        $$;
        create trigger "events_notify_insert" after insert on "events" for each statement execute function "events_notify"();`,
    },
  ],
  properties: {
    id: p.string().primary().length(64),
    /**
     * The order events were recorded in (a database sequence, given at insert): events of one change share its time,
     * and the relay, hence the webhook deliveries, follows this order (docs/adding-a-module.md, "Checklist", step 5).
     */
    seq: p.bigint('number').autoincrement(),
    organizationId: p.string().length(64).nullable(),
    type: p.string().length(64),
    /** `{ object }`. Stored as `json` (not `jsonb`) so the object keeps the key order the API shows. */
    data: p.json<Record<string, unknown>>().columnType('json'),
    createdAt: p.datetime(3).columnType('timestamptz(3)'),
    dispatchedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class Event extends EventSchema.class {}
EventSchema.setClass(Event);
