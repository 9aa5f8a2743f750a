import { sessionEndUnder } from '../../access/security-policy.js';
import type { LoginSession } from '../../access/session.entity.js';
import type { ActorContext } from '../../kit/deps.js';
import { notFound } from '../../lib/errors.js';
import { isId } from '../../lib/ids.js';
import { authRepositoryOf } from './auth.repository.js';
import type { TLoginSession, TRevokeAllSessionsInput } from './auth.schema.js';

/**
 * The caller's login sessions (docs/accounts-and-sessions.md, "Accounts and sessions"). Revoking a session makes its access and refresh
 * tokens fail from the next call on (the access check reads the session with the user, server/access/actor.ts).
 */

function toSessionDto(s: LoginSession, currentId: string, expiresAt: Date): TLoginSession {
  return {
    id: s.id,
    created_at: s.createdAt.toISOString(),
    last_used_at: (s.lastUsedAt ?? s.createdAt).toISOString(),
    expires_at: expiresAt.toISOString(),
    ip: s.ip ?? null,
    user_agent: s.userAgent ?? null,
    current: s.id === currentId,
    method: s.method,
  };
}

/**
 * `GET /auth/sessions`: the caller's live sessions, newest first. Under the organization's `session_max_age`
 * (docs/organization.md, "Security policies"), each ends by that bound too: one older than it is expired, so not
 * listed, and the others show the earlier end.
 */
export async function listSessions(ctx: ActorContext) {
  const now = ctx.deps.clock.now();
  const rows = await authRepositoryOf(ctx.deps).liveSessions(ctx.em, ctx.actor.userId, now);
  const maxAge = ctx.actor.policy?.sessionMaxAgeSeconds ?? null;
  const sessions = rows
    .map((s) => ({ s, end: sessionEndUnder(maxAge, s.createdAt, s.expiresAt) }))
    .filter(({ end }) => end > now)
    .map(({ s, end }) => toSessionDto(s, ctx.actor.sessionId, end));
  return { success: true as const, sessions, total: sessions.length };
}

/** `DELETE /auth/sessions/{id}`: one of the caller's live sessions; anyone else's, or a revoked one, is 404. */
export async function revokeSession(ctx: ActorContext, id: string) {
  if (!isId('ses', id)) throw notFound('Login session');
  const now = ctx.deps.clock.now();
  const revoked = await authRepositoryOf(ctx.deps).revokeLiveSession(ctx.em, ctx.actor.userId, id, now);
  if (!revoked) throw notFound('Login session');
  return { success: true as const, message: 'The session is signed out', id };
}

/** `POST /auth/sessions/revoke-all`: every live session of the caller, the current one too unless kept. */
export async function revokeAllSessions(ctx: ActorContext, input: TRevokeAllSessionsInput) {
  const now = ctx.deps.clock.now();
  const keep = input.keep_current ? ctx.actor.sessionId : null;
  const revoked = await authRepositoryOf(ctx.deps).revokeSessionsOf(ctx.em, ctx.actor.userId, keep, now);
  return {
    success: true as const,
    message: input.keep_current
      ? 'Every other session is signed out'
      : 'Every session is signed out, this one included',
    revoked,
  };
}
