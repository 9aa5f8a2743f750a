import type { LoginSession, SessionMethod } from '../../access/session.entity.js';
import { ACCESS_TOKEN_TTL_SECONDS, REFRESH_TOKEN_TTL_MS } from '../../access/tokens.js';
import { toUserSummaryDto } from '../../access/user.dto.js';
import type { User } from '../../access/user.entity.js';
import { userLogin } from '../../access/user.events.js';
import { noteAuditActor, writeAuditEntry, type AuditActor } from '../../events/audit.js';
import type { RequestContext } from '../../kit/deps.js';
import { randomToken, sha256Hex } from '../../lib/crypto.js';
import { invalidCredentials } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { authRepositoryOf } from './auth.repository.js';
import type { TLoginOutput } from './auth.schema.js';

/**
 * What a sign-in shares whichever way it went (password alone, or password then two-factor code): the login
 * audit actor, and the end of a successful one (session, tokens, `user.login`). Both the password
 * service (auth.service.ts) and the two-factor service import it, and it imports neither.
 */

export const INVALID_LOGIN = () =>
  invalidCredentials(
    'Invalid email or password: check both, or reset the password with POST /v1/auth/password-reset',
  );

export function auditActor(user: Pick<User, 'id' | 'email' | 'organization'>): AuditActor {
  return { type: 'user', id: user.id, email: user.email, organizationId: user.organization.id };
}

/** `auth.login_failed` in the audit log of the user whose email was tried (docs/audit-log.md, "Audit log"). */
export async function recordLoginFailure(ctx: RequestContext, user: User): Promise<void> {
  if (!ctx.deps.config.auditLogEnabled) return;
  await writeAuditEntry(ctx.em, {
    action: 'auth.login_failed',
    actor: auditActor(user),
    request: { requestId: ctx.requestId, ip: ctx.ip, userAgent: ctx.userAgent },
    status: 401,
    now: ctx.deps.clock.now(),
  });
}

/**
 * When a session used at `now` expires: 30 days of inactivity (the refresh token's life), never later than
 * `SESSION_MAX_AGE` after its sign-in, nor than the organization's `session_max_age` (`orgMaxAgeSeconds`, when its
 * policy sets one: docs/organization.md, "Security policies"); the smaller bound wins.
 */
export function sessionExpiry(
  ctx: RequestContext,
  createdAt: Date,
  now: Date,
  orgMaxAgeSeconds: number | null = null,
): Date {
  const maxAgeMs =
    orgMaxAgeSeconds === null
      ? ctx.deps.config.sessionMaxAgeMs
      : Math.min(ctx.deps.config.sessionMaxAgeMs, orgMaxAgeSeconds * 1000);
  return new Date(Math.min(now.getTime() + REFRESH_TOKEN_TTL_MS, createdAt.getTime() + maxAgeMs));
}

/**
 * Opens a login session (`method`: how the user signed in) and issues its first token pair. Runs inside the caller's
 * unit of work.
 */
export function issueSession(
  ctx: RequestContext,
  user: User,
  method: SessionMethod = 'password',
): { access: string; refresh: string } {
  const now = ctx.deps.clock.now();
  const expiresAt = sessionExpiry(ctx, now, now);
  const session = authRepositoryOf(ctx.deps).createSession(ctx.em, {
    id: newId('ses'),
    now,
    user,
    expiresAt,
    ip: ctx.ip,
    userAgent: ctx.userAgent ?? null,
    method,
  });
  const refresh = newRefreshToken(ctx, session, now, expiresAt);
  const access = ctx.deps.tokens.sign(
    { sub: user.id, org: user.organization.id, sid: session.id },
    Math.floor(now.getTime() / 1000),
  );
  return { access, refresh };
}

/** A refresh token of `session`, valid as long as the session is. */
export function newRefreshToken(
  ctx: RequestContext,
  session: LoginSession,
  now: Date,
  expiresAt: Date,
): string {
  const value = randomToken('rt_', 256);
  authRepositoryOf(ctx.deps).createRefreshToken(ctx.em, {
    id: newId('ses').replace(/^ses_/, 'rtk_'),
    now,
    session,
    tokenHash: sha256Hex(value),
    expiresAt,
  });
  return value;
}

export function tokenResponse(tokens: { access: string; refresh: string }) {
  return {
    success: true as const,
    token: tokens.access,
    refresh_token: tokens.refresh,
    token_type: 'Bearer' as const,
    expires_in: ACCESS_TOKEN_TTL_SECONDS,
  };
}

/**
 * The end of a successful sign-in (password, or password and code): throttle cleared, session, `user.login`; with
 * `audit`, an entry of that action too, committed with the session (the owner's break-glass sign-in, sso-enforcement.ts).
 */
export async function completeLogin(
  ctx: RequestContext,
  user: User,
  throttle: string,
  opts: { audit?: string } = {},
): Promise<TLoginOutput> {
  const now = ctx.deps.clock.now();
  noteAuditActor(auditActor(user));
  const repository = authRepositoryOf(ctx.deps);
  const tokens = await repository.transaction(ctx.em, async (em) => {
    // A challenge opened before the organization was deleted completes nothing after it.
    const org = await repository.lockOrganizationShared(em, user.organization.id);
    if (!org || org.deletedAt) throw INVALID_LOGIN();
    await repository.clearThrottle(em, throttle);
    user.lastLogin = now;
    const t = issueSession({ ...ctx, em }, user);
    repository.recordEvent(em, userLogin, toUserSummaryDto(user), user.organization.id, now);
    if (opts.audit && ctx.deps.config.auditLogEnabled) {
      await writeAuditEntry(em, {
        action: opts.audit,
        actor: auditActor(user),
        request: { requestId: ctx.requestId, ip: ctx.ip, userAgent: ctx.userAgent },
        status: 200,
        now,
      });
    }
    return t;
  });
  return { ...tokenResponse(tokens), user: toUserSummaryDto(user) };
}
