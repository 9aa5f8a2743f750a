import { randomBytes } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import QRCode from 'qrcode';
import { loadUserDetail } from '../../access/user.dto.js';
import type { User } from '../../access/user.entity.js';
import { userUpdated } from '../../access/user.events.js';
import type { Em } from '../../db/orm.js';
import { noteAuditActor } from '../../events/audit.js';
import type { ActorContext, AppDeps, RequestContext } from '../../kit/deps.js';
import { decryptSecret, encryptSecret, randomToken, sha256Hex } from '../../lib/crypto.js';
import { conflict, invalidCredentials, validation } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import {
  assertNotThrottled,
  confirmPassword,
  recordFailure,
  throttleKey,
} from '../../access/login-throttle.js';
import { authRepositoryOf, type AuthRepository } from './auth.repository.js';
import { auditActor, completeLogin, recordLoginFailure } from './login-completion.js';
import {
  assertNoSsoRequired,
  BREAK_GLASS_ACTION,
  passwordSignInOf,
  ssoRequiredError,
} from './sso-enforcement.js';
import type {
  TLoginOutput,
  TTwoFactorChallengeOutput,
  TTwoFactorDisableInput,
  TTwoFactorEnableInput,
  TTwoFactorSetupOutput,
  TTwoFactorVerifyInput,
} from './auth.schema.js';
import type { TwoFactorCredential } from './two-factor.entity.js';

/** TOTP of RFC 6238 as authenticator apps read it: SHA-1, 6 digits, 30-second steps. */
const PERIOD_SECONDS = 30;
/** Codes of one step before or after now are accepted (clock drift between the phone and the server). */
const WINDOW = 1;
const ISSUER = 'Cloud Platform';
export const CHALLENGE_TTL_SECONDS = 300;
/** Wrong codes after which a challenge is void (sign in again). */
export const CHALLENGE_MAX_FAILURES = 5;
const RECOVERY_CODES = 10;

const invalidCode = () =>
  invalidCredentials(
    'Invalid two-factor code: give the current code of the authenticator app (or a recovery code)',
  );
const invalidChallenge = () => invalidCredentials('Invalid or expired two-factor challenge; sign in again');

function totp(secretBase32: string, label: string): TOTP {
  return new TOTP({
    issuer: ISSUER,
    label,
    algorithm: 'SHA1',
    digits: 6,
    period: PERIOD_SECONDS,
    secret: Secret.fromBase32(secretBase32),
  });
}

/** The time step a valid `code` belongs to, or null. */
function acceptedStep(secretBase32: string, code: string, now: Date): number | null {
  const delta = totp(secretBase32, '').validate({ token: code, timestamp: now.getTime(), window: WINDOW });
  if (delta === null) return null;
  return Math.floor(now.getTime() / 1000 / PERIOD_SECONDS) + delta;
}

/** `xxxx-xxxx-xxxx` of a base32 alphabet without look-alikes: 60 random bits each. */
function newRecoveryCode(): string {
  const alphabet = 'abcdefghjkmnpqrstuvwxyz23456789';
  const bytes = randomBytes(12);
  let out = '';
  for (let i = 0; i < 12; i++) {
    if (i > 0 && i % 4 === 0) out += '-';
    out += alphabet[bytes[i]! % alphabet.length];
  }
  return out;
}

const normalizeRecoveryCode = (code: string) => code.trim().toLowerCase();

/**
 * Accepts `code` for the credential only if its step is later than the last accepted one, recording it: a code is
 * good once, and two concurrent uses of one code cannot both pass (the update is conditional).
 */
async function consumeCode(
  repository: AuthRepository,
  em: Em,
  cred: TwoFactorCredential,
  secret: string,
  code: string,
  now: Date,
) {
  const step = acceptedStep(secret, code, now);
  if (step === null) return false;
  return repository.claimStep(em, cred.id, step, now);
}

/** Marks one unused recovery code of the user as used; false when there is none matching. */
function consumeRecoveryCode(
  repository: AuthRepository,
  em: Em,
  userId: string,
  code: string,
  now: Date,
): Promise<boolean> {
  return repository.useRecoveryCode(em, userId, sha256Hex(normalizeRecoveryCode(code)), now);
}

/** Uses the factor given (a code of the credential's secret, or one of the user's recovery codes); false when wrong. */
function consumeFactor(
  ctx: { deps: AppDeps },
  repository: AuthRepository,
  em: Em,
  cred: TwoFactorCredential,
  sealedSecret: string,
  userId: string,
  factor: ReturnType<typeof oneFactor>,
  now: Date,
): Promise<boolean> {
  return factor.kind === 'code'
    ? consumeCode(repository, em, cred, decryptSecret(ctx.deps.keys.secrets, sealedSecret), factor.value, now)
    : consumeRecoveryCode(repository, em, userId, factor.value, now);
}

/** Either a code or a recovery code, not both and not neither. */
function oneFactor(input: { code?: string | undefined; recovery_code?: string | undefined }) {
  if (input.code !== undefined && input.recovery_code !== undefined) {
    throw validation('code', 'Give either code or recovery_code, not both');
  }
  if (input.code === undefined && input.recovery_code === undefined) {
    throw validation('code', 'Required: the code of the authenticator app, or a recovery_code');
  }
  return input.code !== undefined
    ? ({ kind: 'code', value: input.code } as const)
    : ({ kind: 'recovery', value: input.recovery_code! } as const);
}

async function emitUserUpdated(ctx: ActorContext, em: Em, user: User, now: Date): Promise<void> {
  const detail = await loadUserDetail(em, ctx.deps.registry.ownedResources, user, now);
  authRepositoryOf(ctx.deps).recordEvent(em, userUpdated, detail, user.organization.id, now);
}

/** `POST /auth/2fa/setup`: a new secret to enrol, pending until `enable` confirms a code of it. */
export async function setup(ctx: ActorContext): Promise<TTwoFactorSetupOutput> {
  const { actor } = ctx;
  if (actor.user.twoFactorEnabled) throw conflict('Two-factor sign-in is already enabled; disable it first');
  // Its organization enforces single sign-on: the identity provider is the second factor (docs/sso.md).
  await assertNoSsoRequired(ctx.deps, ctx.em, actor);
  const secret = new Secret({ size: 20 }).base32;
  const now = ctx.deps.clock.now();
  const repository = authRepositoryOf(ctx.deps);
  await repository.transaction(ctx.em, async (em) => {
    const cred = await repository.credentialOf(em, actor.userId, true);
    const pendingSecret = encryptSecret(ctx.deps.keys.secrets, secret);
    if (cred) {
      cred.pendingSecret = pendingSecret;
      cred.updatedAt = now;
    } else {
      repository.createCredential(em, { id: newId('tfa'), now, userId: actor.userId, pendingSecret });
    }
  });
  const otpauthUrl = totp(secret, actor.email).toString();
  return {
    success: true,
    secret,
    otpauth_url: otpauthUrl,
    qr_code_svg: await QRCode.toString(otpauthUrl, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 }),
  };
}

/**
 * `POST /auth/2fa/enable {password, code}`: the password (as at disable: a token alone must not be enough to tie the
 * account to an authenticator someone else holds), then a code of the pending secret; returns the recovery codes,
 * once. Every other session of the user is signed out.
 */
export async function enable(
  ctx: ActorContext,
  input: TTwoFactorEnableInput,
): Promise<{ success: true; recovery_codes: string[] }> {
  const { actor } = ctx;
  await assertNoSsoRequired(ctx.deps, ctx.em, actor);
  // bcrypt outside any transaction; a wrong password counts towards the login throttle.
  await confirmPassword(ctx, input.password);
  const now = ctx.deps.clock.now();
  const codes = Array.from({ length: RECOVERY_CODES }, newRecoveryCode);
  const repository = authRepositoryOf(ctx.deps);
  await repository.transaction(ctx.em, async (em) => {
    const user = await repository.lockUser(em, actor.userId);
    if (user.twoFactorEnabled)
      throw conflict(
        'Two-factor sign-in is already enabled: turn it off first with POST /v1/auth/2fa/disable',
      );
    const cred = await repository.credentialOf(em, actor.userId, true);
    if (!cred?.pendingSecret) throw conflict('Start with POST /auth/2fa/setup');
    const secret = decryptSecret(ctx.deps.keys.secrets, cred.pendingSecret);
    const step = acceptedStep(secret, input.code, now);
    if (step === null) throw validation('code', 'The code does not match: check the authenticator app');
    cred.secret = cred.pendingSecret;
    cred.pendingSecret = null;
    cred.lastStep = step;
    cred.enabledAt = now;
    cred.updatedAt = now;
    await repository.deleteRecoveryCodes(em, actor.userId);
    repository.addRecoveryCodes(
      em,
      user,
      codes.map((code) => ({ id: newId('rcv'), codeHash: sha256Hex(code) })),
      now,
    );
    user.twoFactorEnabled = true;
    user.updatedAt = now;
    // Sessions opened with the password alone end: from now on a sign-in needs the second factor.
    await repository.revokeSessionsOf(em, actor.userId, actor.sessionId, now);
    await emitUserUpdated(ctx, em, user, now);
  });
  return { success: true, recovery_codes: codes };
}

/** `POST /auth/2fa/disable {password, code | recovery_code}`. */
export async function disable(
  ctx: ActorContext,
  input: TTwoFactorDisableInput,
): Promise<{ success: true; message: string }> {
  const { actor } = ctx;
  const factor = oneFactor(input);
  const key = throttleKey(actor.email, ctx.ip);
  // bcrypt outside any transaction.
  await confirmPassword(ctx, input.password);
  const now = ctx.deps.clock.now();
  const repository = authRepositoryOf(ctx.deps);
  const accepted = await repository.transaction(ctx.em, async (em) => {
    const user = await repository.lockUser(em, actor.userId);
    const cred = await repository.credentialOf(em, actor.userId, true);
    if (!user.twoFactorEnabled || !cred?.secret)
      throw conflict('Two-factor sign-in is not enabled: there is nothing to turn off');
    const ok = await consumeFactor(ctx, repository, em, cred, cred.secret, actor.userId, factor, now);
    if (!ok) return false;
    await repository.deleteRecoveryCodes(em, actor.userId);
    await repository.deleteLoginChallenges(em, actor.userId);
    repository.removeCredential(em, cred);
    user.twoFactorEnabled = false;
    user.updatedAt = now;
    await emitUserUpdated(ctx, em, user, now);
    return true;
  });
  if (!accepted) {
    await recordFailure(ctx.em, key, ctx.deps.clock.now());
    throw invalidCode();
  }
  return { success: true, message: 'Two-factor sign-in is disabled' };
}

/** After the right password of a user with two-factor on: a challenge instead of tokens. */
export async function openLoginChallenge(
  ctx: RequestContext,
  user: User,
): Promise<TTwoFactorChallengeOutput> {
  const now = ctx.deps.clock.now();
  noteAuditActor(auditActor(user));
  const token = randomToken('tfc_', 256);
  const repository = authRepositoryOf(ctx.deps);
  repository.createLoginChallenge(ctx.em, {
    id: newId('chl'),
    now,
    user,
    tokenHash: sha256Hex(token),
    expiresAt: new Date(now.getTime() + CHALLENGE_TTL_SECONDS * 1000),
  });
  await repository.flush(ctx.em);
  return {
    success: true,
    two_factor_required: true,
    challenge_token: token,
    expires_in: CHALLENGE_TTL_SECONDS,
  };
}

/** `POST /auth/2fa/verify`: completes a sign-in with a code (or a recovery code): the login body. */
export async function verify(ctx: RequestContext, input: TTwoFactorVerifyInput): Promise<TLoginOutput> {
  const factor = oneFactor(input);
  const now = ctx.deps.clock.now();
  const repository = authRepositoryOf(ctx.deps);
  const challenge = await repository.findLoginChallenge(ctx.em, sha256Hex(input.challenge_token));
  if (!challenge || challenge.closedAt || challenge.expiresAt <= now) throw invalidChallenge();
  const user = challenge.user;
  const key = throttleKey(user.email, ctx.ip);
  await assertNotThrottled(ctx.em, key, ctx.deps.clock.now());

  const outcome = await repository.transaction(ctx.em, async (em) => {
    // The challenge row is the lock: concurrent verifications of one challenge run one after the other.
    const c = await repository.lockOpenChallenge(em, challenge.id);
    if (!c || c.expiresAt <= now || c.failures >= CHALLENGE_MAX_FAILURES) return 'void' as const;
    const cred = await repository.credentialOf(em, user.id, true);
    const u = await repository.getUser(em, user.id);
    if (!cred?.secret || !u.twoFactorEnabled || u.deletedAt || u.status !== 'active') {
      c.closedAt = now;
      return 'void' as const;
    }
    const ok = await consumeFactor(ctx, repository, em, cred, cred.secret, user.id, factor, now);
    if (!ok) {
      c.failures += 1;
      if (c.failures >= CHALLENGE_MAX_FAILURES) c.closedAt = now;
      c.updatedAt = now;
      return 'wrong' as const;
    }
    c.closedAt = now;
    c.updatedAt = now;
    return 'ok' as const;
  });
  if (outcome === 'void') throw invalidChallenge();
  if (outcome === 'wrong') {
    await recordFailure(ctx.em, key, ctx.deps.clock.now());
    await recordLoginFailure(ctx, user);
    throw invalidCode();
  }
  // Single sign-on enforced since the password was given: as at login (sso-enforcement.ts).
  const signIn = await passwordSignInOf(ctx, user);
  if (signIn === 'sso-required') throw ssoRequiredError();
  return completeLogin(ctx, user, key, signIn === 'break-glass' ? { audit: BREAK_GLASS_ACTION } : {});
}

/** Challenges that ended or expired more than a day ago (with the sessions purge). */
export async function purgeLoginChallenges(deps: AppDeps, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - 86_400_000);
  return authRepositoryOf(deps).purgeLoginChallenges(cutoff);
}
