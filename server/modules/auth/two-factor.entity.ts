import { defineEntity, p } from '@mikro-orm/core';
import { User } from '../../access/user.entity.js';
import { BaseSchema } from '../../db/base.entity.js';

/**
 * A user's TOTP secret (docs/two-factor.md, "Two-factor sign-in"), encrypted with the two-factor key. `pendingSecret` is the one
 * `setup` issued and `enable` has not confirmed yet; `secret` the confirmed one. `lastStep` is the 30-second time
 * step of the last code accepted: a code of that step or an earlier one is refused (no replay).
 */
export const TwoFactorCredentialSchema = defineEntity({
  name: 'TwoFactorCredential',
  tableName: 'two_factor_credentials',
  extends: BaseSchema,
  properties: {
    user: () => p.manyToOne(User).unique().deleteRule('cascade'),
    secret: p.text().nullable().hidden().lazy(),
    pendingSecret: p.text().nullable().hidden().lazy(),
    lastStep: p.bigint('number').nullable(),
    enabledAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class TwoFactorCredential extends TwoFactorCredentialSchema.class {}
TwoFactorCredentialSchema.setClass(TwoFactorCredential);

/** A single-use recovery code, stored as its SHA-256. */
export const RecoveryCodeSchema = defineEntity({
  name: 'RecoveryCode',
  tableName: 'recovery_codes',
  extends: BaseSchema,
  properties: {
    user: () => p.manyToOne(User).index().deleteRule('cascade'),
    codeHash: p.string().length(64).hidden(),
    usedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class RecoveryCode extends RecoveryCodeSchema.class {}
RecoveryCodeSchema.setClass(RecoveryCode);

/**
 * The second step of a sign-in with two-factor on: the password was right, the code is awaited. The token is given
 * once (`challenge_token`) and stored as its SHA-256; five wrong codes or five minutes void it.
 */
export const LoginChallengeSchema = defineEntity({
  name: 'LoginChallenge',
  tableName: 'login_challenges',
  extends: BaseSchema,
  properties: {
    user: () => p.manyToOne(User).index().deleteRule('cascade'),
    tokenHash: p.string().length(64).unique().hidden(),
    expiresAt: p.datetime(3).columnType('timestamptz(3)'),
    failures: p.integer().default(0),
    /** Set when the challenge was completed or voided. */
    closedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class LoginChallenge extends LoginChallengeSchema.class {}
LoginChallengeSchema.setClass(LoginChallenge);
