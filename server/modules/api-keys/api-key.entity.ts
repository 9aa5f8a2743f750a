import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { User } from '../../access/user.entity.js';
import { BaseSchema } from '../../db/base.entity.js';

/**
 * An API key (docs/api-keys.md, "API keys"): a long-lived bearer credential of the organization that acts as its creator with
 * at most the permissions listed on it. Only the SHA-256 of the secret is kept (the secret carries 256 random bits,
 * so a fast hash is enough and keeps the per-request lookup cheap); the first 12 characters are kept in clear so a
 * user can tell keys apart. Revoked keys stay (hidden from the API) so the audit log can still name them.
 */
export const ApiKeySchema = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  extends: BaseSchema,
  indexes: [
    {
      name: 'api_keys_organization_list_index',
      expression:
        'create index "api_keys_organization_list_index" on "api_keys" ("organization_id", "created_at" desc, "id" desc) where "revoked_at" is null',
    },
    { name: 'api_keys_created_by_id_index', properties: ['createdBy'] },
  ],
  uniques: [{ name: 'api_keys_secret_hash_unique', properties: ['secretHash'] }],
  properties: {
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    createdBy: () => p.manyToOne(User).deleteRule('cascade'),
    name: p.string().length(100),
    /** The secret's first 12 characters (`sk_` and 9 more). */
    prefix: p.string().length(16),
    /** Lowercase hex SHA-256 of the whole secret. */
    secretHash: p.string().length(64).hidden(),
    /** Canonical permission strings (access/permissions.ts), as listed at creation. */
    permissions: p.array().default([]),
    expiresAt: p.datetime(3).columnType('timestamptz(3)'),
    lastUsedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** Set by DELETE /api-keys/:id, or when the creator is deleted or suspended. */
    revokedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class ApiKey extends ApiKeySchema.class {}
ApiKeySchema.setClass(ApiKey);
