import { LockMode } from '@mikro-orm/core';
import { loadUserDetail } from '../../access/user.dto.js';
import { signInAccountOf, User } from '../../access/user.entity.js';
import { userUpdated } from '../../access/user.events.js';
import type { Em } from '../../db/orm.js';
import { noteAuditActor } from '../../events/audit.js';
import { recordEvent } from '../../events/record-event.js';
import type { ActorContext, AppDeps, RequestContext } from '../../kit/deps.js';
import { sha256Hex } from '../../lib/crypto.js';
import { invalidCredentials } from '../../lib/errors.js';
import type {
  TChangePasswordInput,
  TConfirmPasswordResetInput,
  TRequestPasswordResetInput,
} from './auth.schema.js';
import { sendPasswordResetJob } from './auth.jobs.js';
import { confirmPassword } from '../../kit/login-throttle.js';
import { auditActor } from './login-completion.js';
import { PasswordResetToken } from './password-reset.entity.js';
import { revokeSessionsOf } from './sessions.service.js';

const RESET_REQUESTED =
  'If an account has this address, a link to choose a new password has been sent to it.';
const invalidResetToken = () =>
  invalidCredentials(
    'Invalid, used or expired password-reset token: ask for a new link with POST /v1/auth/password-reset',
  );

async function emitUserUpdated(deps: AppDeps, em: Em, user: User, now: Date): Promise<void> {
  const detail = await loadUserDetail(em, deps.registry.ownedResources, user, now);
  recordEvent(em, userUpdated, detail, user.organization.id, now);
}

/** Voids the user's unused reset tokens: a new password makes older links useless. */
async function voidResetTokens(em: Em, userId: string, now: Date): Promise<void> {
  await em.nativeUpdate(PasswordResetToken, { user: userId, usedAt: null }, { usedAt: now, updatedAt: now });
}

/**
 * `POST /auth/password {current_password, new_password}`: a wrong current password is 401 and counts towards the
 * login throttle; otherwise the password changes and every other session of the user is signed out.
 */
export async function changePassword(ctx: ActorContext, input: TChangePasswordInput) {
  const { actor } = ctx;
  // bcrypt outside any transaction.
  await confirmPassword(ctx, input.current_password);
  const passwordHash = await ctx.deps.passwords.hash(input.new_password);
  const now = ctx.deps.clock.now();
  const revoked = await ctx.em.transactional(async (em) => {
    const user = await em.findOneOrFail(
      User,
      { id: actor.userId },
      { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['organization', 'passwordHash'] },
    );
    user.passwordHash = passwordHash;
    user.updatedAt = now;
    await voidResetTokens(em, user.id, now);
    const n = await revokeSessionsOf(em, user.id, actor.sessionId, now);
    await emitUserUpdated(ctx.deps, em, user, now);
    return n;
  });
  return {
    success: true as const,
    message: 'Password changed; every other session is signed out',
    sessions_revoked: revoked,
  };
}

/**
 * `POST /auth/password-reset {email}`: 202 with the same body whatever the address. The request only queues the
 * job that looks the account up and mails the link, with the same queries for a known or an unknown address, so
 * neither the answer nor its time tells whether an account exists.
 */
export async function requestPasswordReset(ctx: RequestContext, input: TRequestPasswordResetInput) {
  const email = input.email.toLowerCase();
  // The address's sign-in account only: an invitation pending in some organization is not one.
  const user = await ctx.em.findOne(User, signInAccountOf(email), { populate: ['organization'] });
  // In the audit log of the account asked for; an unknown address is recorded nowhere (as failed logins).
  if (user && !user.organization.deletedAt) noteAuditActor(auditActor(user));
  await ctx.em.transactional(async (tx) => {
    await ctx.deps.jobs.send(sendPasswordResetJob, { email }, { em: tx });
  });
  return { success: true as const, message: RESET_REQUESTED };
}

/**
 * `POST /auth/password-reset/confirm {token, new_password}`: sets the password, uses the token up, voids the user's
 * other reset tokens and signs out every session. An unknown, used or expired token is 401.
 */
export async function confirmPasswordReset(ctx: RequestContext, input: TConfirmPasswordResetInput) {
  if (!input.token.startsWith('pwr_')) throw invalidResetToken();
  const hash = sha256Hex(input.token);
  const now = ctx.deps.clock.now();
  const found = await ctx.em.findOne(PasswordResetToken, { tokenHash: hash }, { populate: ['user'] });
  if (!found || found.usedAt || found.expiresAt <= now) throw invalidResetToken();
  // bcrypt outside any transaction; the token is claimed below, so two uses cannot both pass.
  const passwordHash = await ctx.deps.passwords.hash(input.new_password);
  await ctx.em.transactional(async (em) => {
    const claimed = await em.nativeUpdate(
      PasswordResetToken,
      { id: found.id, usedAt: null, expiresAt: { $gt: now } },
      { usedAt: now, updatedAt: now },
    );
    if (claimed === 0) throw invalidResetToken();
    const user = await em.findOneOrFail(
      User,
      { id: found.user.id },
      { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['organization', 'passwordHash'] },
    );
    if (user.deletedAt || user.status !== 'active' || user.organization.deletedAt) throw invalidResetToken();
    noteAuditActor(auditActor(user));
    user.passwordHash = passwordHash;
    user.updatedAt = now;
    await voidResetTokens(em, user.id, now);
    await revokeSessionsOf(em, user.id, null, now);
    await emitUserUpdated(ctx.deps, em, user, now);
  });
  return {
    success: true as const,
    message: 'Password reset; every session of the account is signed out: log in with the new password',
  };
}
