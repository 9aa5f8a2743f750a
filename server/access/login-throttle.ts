import type { Em } from '../db/orm.js';
import { sha256Hex } from '../lib/crypto.js';
import { invalidCredentials, tooManyLoginAttempts } from '../lib/errors.js';
import type { Clock } from '../lib/time.js';
import type { Actor } from './actor.js';
import type { PasswordHasher } from './passwords.js';
import { User } from './user.entity.js';

/**
 * The login throttle (docs/api-conventions.md, "Errors"): failed sign-ins per email and client address, 10 in 15 minutes lock that
 * pair for 15 minutes (429 `TOO_MANY_LOGIN_ATTEMPTS`, even with the right password). Wrong passwords and codes count
 * wherever they are checked: login, two-factor verification, and every operation a signed-in user confirms with
 * their password (`confirmPassword`), so a stolen token cannot be used to guess the password faster than login.
 */
export const LOGIN_MAX_FAILURES = 10;
export const LOGIN_LOCK_MS = 15 * 60_000;

export function throttleKey(email: string, ip: string): string {
  return sha256Hex(`${email.toLowerCase()}|${ip}`);
}

/** Refuses (429) while the pair of `key` is locked at `now`. */
export async function assertNotThrottled(em: Em, key: string, now: Date): Promise<void> {
  const rows = await em.execute<{ locked_until: Date | null }[]>(
    'select locked_until from login_throttles where key = ?',
    [key],
  );
  const lockedUntil = rows[0]?.locked_until ? new Date(rows[0].locked_until) : null;
  if (lockedUntil && lockedUntil > now) {
    throw tooManyLoginAttempts(Math.max(1, Math.ceil((lockedUntil.getTime() - now.getTime()) / 1000)));
  }
}

/** Counts a failure atomically (two processes may see the same email); locks after the tenth in a window. */
export async function recordFailure(em: Em, key: string, now: Date): Promise<void> {
  const windowStart = new Date(now.getTime() - LOGIN_LOCK_MS);
  const lockUntil = new Date(now.getTime() + LOGIN_LOCK_MS);
  await em.execute(
    `insert into login_throttles (key, failures, window_started_at, locked_until) values (?, 1, ?, null)
     on conflict (key) do update set
       failures = case when login_throttles.window_started_at < ? then 1 else login_throttles.failures + 1 end,
       window_started_at = case when login_throttles.window_started_at < ? then excluded.window_started_at
                                else login_throttles.window_started_at end,
       locked_until = case when login_throttles.window_started_at >= ? and login_throttles.failures + 1 >= ?
                           then ?::timestamptz else null end`,
    [key, now, windowStart, windowStart, windowStart, LOGIN_MAX_FAILURES, lockUntil],
  );
}

/** What checking the caller's password reads of the call (a service's ActorContext, server/kit/deps.ts, is one). */
export interface PasswordConfirmation {
  readonly em: Em;
  /** The client's address: the throttle counts per email and address. */
  readonly ip: string;
  readonly actor: Pick<Actor, 'userId' | 'email'>;
  readonly deps: {
    readonly clock: Clock;
    readonly passwords: Pick<PasswordHasher, 'compare' | 'compareWithDummy'>;
  };
}

/**
 * Checks the signed-in caller's own password for an operation that asks for it (deleting the organization,
 * transferring it, turning two-factor on or off): refused with 429 while the login throttle of the caller's email
 * and address is locked, whatever the password; a wrong one is 401 `INVALID_CREDENTIALS` and counts as a failed
 * login. A right one does not clear the throttle (only a sign-in does). Runs bcrypt: call it outside any transaction.
 */
export async function confirmPassword(ctx: PasswordConfirmation, password: string): Promise<void> {
  const key = throttleKey(ctx.actor.email, ctx.ip);
  await assertNotThrottled(ctx.em, key, ctx.deps.clock.now());
  const row = await ctx.em.findOne(User, { id: ctx.actor.userId }, { populate: ['passwordHash'] });
  const ok = row?.passwordHash
    ? await ctx.deps.passwords.compare(password, row.passwordHash)
    : await ctx.deps.passwords.compareWithDummy(password);
  if (!ok || !row?.passwordHash) {
    await recordFailure(ctx.em, key, ctx.deps.clock.now());
    throw invalidCredentials(
      'Invalid password: give your account’s password (forgotten? POST /v1/auth/password-reset)',
    );
  }
}
