import type { User } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import type { AppDeps } from '../../kit/deps.js';
import { randomToken, sha256Hex } from '../../lib/crypto.js';
import { newId } from '../../lib/ids.js';
import { authRepositoryOf } from './auth.repository.js';
import { memberOf, ssoRequiredOf } from './sso-enforcement.js';

/** A user asks at most one reset mail per this interval; asking again sooner sends nothing (no mail bombing). */
export const RESET_MAIL_INTERVAL_MS = 60_000;

/** A new reset token of `user`, stored as its SHA-256; the raw value is returned once (for the mail). */
export function createPasswordResetToken(
  deps: AppDeps,
  em: Em,
  user: User,
  now: Date,
  ttlMs: number,
): string {
  const token = randomToken('pwr_', 256);
  authRepositoryOf(deps).createPasswordResetToken(em, {
    id: newId('pwr'),
    now,
    user,
    tokenHash: sha256Hex(token),
    expiresAt: new Date(now.getTime() + ttlMs),
  });
  return token;
}

/** The job behind a reset request: an active account with a password gets a token and the mail. */
export async function sendPasswordReset(deps: AppDeps, email: string): Promise<void> {
  const repository = authRepositoryOf(deps);
  const em = repository.fork();
  const now = deps.clock.now();
  const user = await repository.findResetRecipient(em, email);
  if (!user?.passwordHash || user.organization.deletedAt) return;
  // Its organization enforces single sign-on: the request answered 202 as for anyone, and nothing is mailed.
  if (await ssoRequiredOf(deps, em, memberOf(user))) return;
  const recent = await repository.countResetTokensSince(
    em,
    user.id,
    new Date(now.getTime() - RESET_MAIL_INTERVAL_MS),
  );
  if (recent > 0) return;
  const ttlMs = deps.config.passwordResetTtlMs;
  const token = createPasswordResetToken(deps, em, user, now, ttlMs);
  await repository.flush(em);
  const link = `${deps.config.publicBaseUrl}/reset-password?token=${encodeURIComponent(token)}`;
  await deps.mail.send({
    kind: 'password_reset',
    to: user.email,
    subject: 'Reset your password',
    link,
    text:
      `Someone asked to reset the password of your account (${user.email}).\n\n` +
      `Choose a new password: ${link}\n\n` +
      `The link works once and expires in ${Math.round(ttlMs / 60_000)} minutes. Every session of the account is signed out ` +
      `when the password is reset. If you did not ask for this, ignore this mail: your password stays as it is.\n`,
  });
}
