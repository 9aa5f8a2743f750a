import { defineEntity, p } from '@mikro-orm/core';
import { User } from '../../access/user.entity.js';
import { BaseSchema } from '../../db/base.entity.js';

/**
 * A password-reset link's token (docs/accounts-and-sessions.md, "Accounts and sessions"): mailed once, stored as its SHA-256, good for
 * `PASSWORD_RESET_TTL` and one use. A password change or reset voids the user's other unused ones.
 */
export const PasswordResetTokenSchema = defineEntity({
  name: 'PasswordResetToken',
  tableName: 'password_reset_tokens',
  extends: BaseSchema,
  properties: {
    user: () => p.manyToOne(User).index().deleteRule('cascade'),
    tokenHash: p.string().length(64).unique().hidden(),
    expiresAt: p.datetime(3).columnType('timestamptz(3)'),
    usedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class PasswordResetToken extends PasswordResetTokenSchema.class {}
PasswordResetTokenSchema.setClass(PasswordResetToken);
