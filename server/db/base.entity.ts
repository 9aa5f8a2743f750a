import { defineEntity, p } from '@mikro-orm/core';

/**
 * Shared columns of every table: a prefixed string id (`usr_…`, `vpn_…`; see lib/ids.ts, always assigned by the
 * service that creates the row so it is known before flush) and millisecond UTC timestamps.
 */
export const BaseSchema = defineEntity({
  name: 'BaseEntity',
  abstract: true,
  properties: {
    id: p.string().primary().length(64),
    createdAt: p
      .datetime(3)
      .onCreate(() => new Date())
      .columnType('timestamptz(3)'),
    updatedAt: p
      .datetime(3)
      .onCreate(() => new Date())
      .onUpdate(() => new Date())
      .columnType('timestamptz(3)'),
  },
});
