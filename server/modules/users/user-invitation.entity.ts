import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { User } from '../../access/user.entity.js';
import { BaseSchema } from '../../db/base.entity.js';

/**
 * An invitation to join an organization: the token is sent (or handed to the admin) once and stored only as its
 * SHA-256. Accepting it sets the password and activates the user; it works once, for 7 days.
 */
export const UserInvitationSchema = defineEntity({
  name: 'UserInvitation',
  tableName: 'user_invitations',
  extends: BaseSchema,
  properties: {
    organization: () => p.manyToOne(Organization).index().deleteRule('cascade'),
    user: () => p.manyToOne(User).index().deleteRule('cascade'),
    invitedById: p.string().length(64).nullable(),
    tokenHash: p.string().length(64).unique().hidden(),
    expiresAt: p.datetime(3).columnType('timestamptz(3)'),
    acceptedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** Set when the invited user is deleted before accepting. */
    revokedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class UserInvitation extends UserInvitationSchema.class {}
UserInvitationSchema.setClass(UserInvitation);
