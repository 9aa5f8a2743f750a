import { defineEntity, p } from '@mikro-orm/core';
import { BaseSchema } from '../db/base.entity.js';
import { User } from './user.entity.js';

/** How a login session was opened. */
export const SESSION_METHODS = ['password', 'sso'] as const;
export type SessionMethod = (typeof SESSION_METHODS)[number];

/**
 * One login: every access token carries its id (`sid`), every refresh token belongs to it. Revoking it (logout,
 * refresh-token reuse, user deleted or suspended, password changed or reset, two-factor enabled, revoked from the
 * list of sessions) makes all of its tokens fail on the next call. `expiresAt` slides with each refresh, never past
 * `createdAt` + `SESSION_MAX_AGE`.
 */
export const LoginSessionSchema = defineEntity({
  name: 'LoginSession',
  tableName: 'login_sessions',
  extends: BaseSchema,
  properties: {
    user: () => p.manyToOne(User).index().deleteRule('cascade'),
    expiresAt: p.datetime(3).columnType('timestamptz(3)').index(),
    revokedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    ip: p.string().length(64).nullable(),
    userAgent: p.string().length(512).nullable(),
    /** When tokens were last issued to it (sign-in or refresh). */
    lastUsedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** How it was opened: a password (two-factor code or not) or a single sign-on (docs/sso.md). */
    method: p.string().length(16).$type<SessionMethod>().default('password'),
  },
});
export class LoginSession extends LoginSessionSchema.class {}
LoginSessionSchema.setClass(LoginSession);

/** A refresh token, stored as the SHA-256 of its value. Used once: each use rotates it. */
export const RefreshTokenSchema = defineEntity({
  name: 'RefreshToken',
  tableName: 'refresh_tokens',
  extends: BaseSchema,
  properties: {
    session: () => p.manyToOne(LoginSession).index().deleteRule('cascade'),
    tokenHash: p.string().length(64).unique(),
    expiresAt: p.datetime(3).columnType('timestamptz(3)'),
    usedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class RefreshToken extends RefreshTokenSchema.class {}
RefreshTokenSchema.setClass(RefreshToken);

/** Failed logins per (email, ip) for throttling (docs/getting-started.md, "Calling the API"). */
export const LoginThrottleSchema = defineEntity({
  name: 'LoginThrottle',
  tableName: 'login_throttles',
  properties: {
    key: p.string().length(128).primary(),
    failures: p.integer().default(0),
    windowStartedAt: p.datetime(3).columnType('timestamptz(3)'),
    lockedUntil: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class LoginThrottle extends LoginThrottleSchema.class {}
LoginThrottleSchema.setClass(LoginThrottle);
