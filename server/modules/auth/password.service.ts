import { loadUserDetail } from '../../access/user.dto.js';
import type { User } from '../../access/user.entity.js';
import { userUpdated } from '../../access/user.events.js';
import type { Em } from '../../db/orm.js';
import { noteAuditActor } from '../../events/audit.js';
import type { ActorContext, AppDeps, RequestContext } from '../../kit/deps.js';
import { sha256Hex } from '../../lib/crypto.js';
import { invalidCredentials } from '../../lib/errors.js';
import type {
  TChangePasswordInput,
  TConfirmPasswordResetInput,
  TRequestPasswordResetInput,
} from './auth.schema.js';
import { sendPasswordResetJob } from './auth.jobs.js';
import { confirmPassword } from '../../access/login-throttle.js';
import { authRepositoryOf } from './auth.repository.js';
import { auditActor } from './login-completion.js';
import { assertNoSsoRequired, memberOf } from './sso-enforcement.js';

const RESET_REQUESTED =
  'If an account has this address, a link to choose a new password has been sent to it.';
const invalidResetToken = () =>
  invalidCredentials(
    'Invalid, used or expired password-reset token: ask for a new link with POST /v1/auth/password-reset',
  );

async function emitUserUpdated(deps: AppDeps, em: Em, user: User, now: Date): Promise<void> {
  const detail = await loadUserDetail(em, deps.registry.ownedResources, user, now);
  authRepositoryOf(deps).recordEvent(em, userUpdated, detail, user.organization.id, now);
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
  const repository = authRepositoryOf(ctx.deps);
  const revoked = await repository.transaction(ctx.em, async (em) => {
    const user = await repository.lockUser(em, actor.userId, { withPasswordHash: true });
    user.passwordHash = passwordHash;
    user.updatedAt = now;
    // A new password makes older reset links useless.
    await repository.voidResetTokens(em, user.id, now);
    const n = await repository.revokeSessionsOf(em, user.id, actor.sessionId, now);
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
  const repository = authRepositoryOf(ctx.deps);
  const user = await repository.findSignInAccount(ctx.em, email);
  // In the audit log of the account asked for; an unknown address is recorded nowhere (as failed logins).
  if (user && !user.organization.deletedAt) noteAuditActor(auditActor(user));
  await repository.transaction(ctx.em, async (tx) => {
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
  const repository = authRepositoryOf(ctx.deps);
  const found = await repository.findPasswordResetToken(ctx.em, hash);
  if (!found || found.usedAt || found.expiresAt <= now) throw invalidResetToken();
  // bcrypt outside any transaction; the token is claimed below, so two uses cannot both pass.
  const passwordHash = await ctx.deps.passwords.hash(input.new_password);
  await repository.transaction(ctx.em, async (em) => {
    if (!(await repository.claimPasswordResetToken(em, found.id, now))) throw invalidResetToken();
    const user = await repository.lockUser(em, found.user.id, { withPasswordHash: true });
    if (user.deletedAt || user.status !== 'active' || user.organization.deletedAt) throw invalidResetToken();
    noteAuditActor(auditActor(user));
    // Its organization enforces single sign-on: no password to choose (docs/sso.md).
    await assertNoSsoRequired(ctx.deps, em, memberOf(user));
    user.passwordHash = passwordHash;
    user.updatedAt = now;
    await repository.voidResetTokens(em, user.id, now);
    await repository.revokeSessionsOf(em, user.id, null, now);
    await emitUserUpdated(ctx.deps, em, user, now);
  });
  return {
    success: true as const,
    message: 'Password reset; every session of the account is signed out: log in with the new password',
  };
}
