import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { User } from '../../access/user.entity.js';

/**
 * The organization's SCIM bearer token (docs/sso.md, "SCIM provisioning"): shown once, stored as its SHA-256. One per
 * organization: a new token replaces the row, and the old one stops working at once.
 */
export const ScimTokenSchema = defineEntity({
  name: 'ScimToken',
  tableName: 'scim_tokens',
  properties: {
    organization: () => p.manyToOne(Organization).primary().deleteRule('cascade'),
    tokenHash: p.string().length(64).unique().hidden(),
    /** The owner who made it (a user id; SCIM's changes are audited in their name). */
    createdBy: p.string().length(64),
    createdAt: p.datetime(3).columnType('timestamptz(3)'),
  },
});
export class ScimToken extends ScimTokenSchema.class {}
ScimTokenSchema.setClass(ScimToken);

/**
 * What the directory says of a user beyond the user row: its `externalId` and the parts of its name (the user's
 * `name` is the SCIM `displayName`). `updatedAt` follows the app clock, set where the row changes.
 */
export const ScimUserSchema = defineEntity({
  name: 'ScimUser',
  tableName: 'scim_users',
  indexes: [
    { name: 'scim_users_organization_id_external_id_index', properties: ['organization', 'externalId'] },
  ],
  properties: {
    user: () => p.manyToOne(User).primary().deleteRule('cascade'),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    externalId: p.string().length(512).nullable(),
    givenName: p.string().length(200).nullable(),
    familyName: p.string().length(200).nullable(),
    updatedAt: p.datetime(3).columnType('timestamptz(3)'),
  },
});
export class ScimUser extends ScimUserSchema.class {}
ScimUserSchema.setClass(ScimUser);
