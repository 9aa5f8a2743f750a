import { defineEntity, p } from '@mikro-orm/core';
import type { Em } from '../db/orm.js';
import { Organization } from './organization.entity.js';

/**
 * The first answer to a request sent with an `Idempotency-Key` (docs/api-conventions.md, "Idempotency"), kept 24 hours under the
 * organization, the caller (`caller_id`: the user, or the API key `key_…`, that sent it) and the key, and written in
 * the transaction of the change it answers (server/trpc/idempotency.ts). Only that caller gets it again.
 * `fingerprint` identifies the request (procedure and input); `body` is the JSON answered, encrypted (AES-256-GCM,
 * `encryptSecret` of lib/crypto.ts) since answers may show a secret once, so that a replay is byte for byte the first
 * answer.
 */
export const IdempotencyRecordSchema = defineEntity({
  name: 'IdempotencyRecord',
  tableName: 'idempotency_records',
  indexes: [{ name: 'idempotency_records_expires_at_index', properties: ['expiresAt'] }],
  properties: {
    organization: () => p.manyToOne(Organization).primary().deleteRule('cascade'),
    callerId: p.string().length(64).primary(),
    key: p.string().length(255).primary(),
    procedure: p.string().length(128),
    fingerprint: p.string().length(64),
    status: p.integer(),
    body: p.text(),
    createdAt: p.datetime(3).columnType('timestamptz(3)'),
    expiresAt: p.datetime(3).columnType('timestamptz(3)'),
  },
});
export class IdempotencyRecord extends IdempotencyRecordSchema.class {}
IdempotencyRecordSchema.setClass(IdempotencyRecord);

/** Deletes the records whose 24 hours are over (the purge job of the core module). */
export async function purgeIdempotencyRecords(em: Em, now: Date): Promise<number> {
  const res = await em.execute('delete from "idempotency_records" where "expires_at" <= ?', [now], 'run');
  return Number((res as { affectedRows?: number }).affectedRows ?? 0);
}
