import type { User } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import { noteAuditActor } from '../../events/audit.js';
import { sha256Hex } from '../../lib/crypto.js';
import { AppError, conflict, forbidden, invalidCredentials } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { DEFAULT_PLAN } from '../../lib/plans.js';
import { toUserDetailDto, toUserSummaryDto } from '../../access/user.dto.js';
import { userCreated } from '../../access/user.events.js';
import type { ActorContext, AppDeps, RequestContext } from '../../kit/deps.js';
import { assertNotThrottled, recordFailure, throttleKey } from '../../access/login-throttle.js';
import { sessionEndUnder, sessionMaxAgeOf } from '../../access/security-policy.js';
import { runOrganizationCreatedHooks } from '../../kit/organization-hooks.js';
import {
  auditActor,
  completeLogin,
  INVALID_LOGIN,
  issueSession,
  newRefreshToken,
  sessionExpiry,
  recordLoginFailure,
  tokenResponse,
} from './login-completion.js';
import { authRepositoryOf } from './auth.repository.js';
import { openLoginChallenge } from './two-factor.service.js';
import {
  BREAK_GLASS_ACTION,
  passwordSignInOf,
  refuseEnforcedDomain,
  ssoRequiredError,
} from './sso-enforcement.js';
import type {
  TLoginInput,
  TLoginOrChallengeOutput,
  TLoginOutput,
  TRefreshInput,
  TRefreshOutput,
  TRegisterInput,
} from './auth.schema.js';

const INVALID_REFRESH = () =>
  invalidCredentials('Invalid or expired refresh token: log in again with POST /v1/auth/login');

export async function login(ctx: RequestContext, input: TLoginInput): Promise<TLoginOrChallengeOutput> {
  const email = input.email.toLowerCase();
  const key = throttleKey(email, ctx.ip);
  await assertNotThrottled(ctx.em, key, ctx.deps.clock.now());
  // An address of a domain whose organization enforces single sign-on, before any password check (docs/sso.md).
  await refuseEnforcedDomain(ctx, email);

  // The address's sign-in account: its invitations pending in other organizations are not accounts.
  const user = await authRepositoryOf(ctx.deps).findSignInAccount(ctx.em, email, { withPasswordHash: true });
  // bcrypt runs outside any transaction, and also for unknown emails so that timing does not tell them apart.
  const ok = user?.passwordHash
    ? await ctx.deps.passwords.compare(input.password, user.passwordHash)
    : await ctx.deps.passwords.compareWithDummy(input.password);
  // A deleted organization's users are unknown from its deletion on (docs/organization.md, "The organization").
  const gone = !!user?.organization.deletedAt;
  if (!user || !user.passwordHash || !ok || user.status !== 'active' || gone) {
    await recordFailure(ctx.em, key, ctx.deps.clock.now());
    // In the audit log of the user's organization; an unknown email is recorded nowhere.
    if (user && !gone) await recordLoginFailure(ctx, user);
    throw INVALID_LOGIN();
  }
  // The organization enforces single sign-on: only its owner goes on with a password (break-glass, audited).
  const signIn = await passwordSignInOf(ctx, user);
  if (signIn === 'sso-required') {
    noteAuditActor(auditActor(user));
    throw ssoRequiredError();
  }
  // With two-factor on, the password opens a challenge; the tokens come from `POST /auth/2fa/verify`.
  if (user.twoFactorEnabled) return openLoginChallenge(ctx, user);
  return completeLogin(ctx, user, key, signIn === 'break-glass' ? { audit: BREAK_GLASS_ACTION } : {});
}

export async function refresh(ctx: RequestContext, input: TRefreshInput): Promise<TRefreshOutput> {
  if (!input.refresh_token.startsWith('rt_')) throw INVALID_REFRESH();
  const now = ctx.deps.clock.now();
  const hash = sha256Hex(input.refresh_token);
  const repository = authRepositoryOf(ctx.deps);
  const result = await repository.transaction(ctx.em, async (em) => {
    const token = await repository.findRefreshToken(em, hash);
    if (!token) return { error: INVALID_REFRESH() };
    const session = token.session;
    const user = session.user;
    noteAuditActor(auditActor(user));
    // Claim the token atomically: of two concurrent uses, exactly one wins; the other is a reuse.
    if (!(await repository.claimRefreshToken(em, token.id, now))) {
      // Reuse of a rotated token: someone else holds this session's chain. Revoke all of it.
      await repository.revokeSessionChain(em, session.id, now);
      return { error: INVALID_REFRESH() };
    }
    // The organization's session_max_age, when its policy sets one (docs/organization.md, "Security policies").
    const maxAge = sessionMaxAgeOf(user.organization);
    if (
      session.revokedAt ||
      token.expiresAt <= now ||
      sessionEndUnder(maxAge, session.createdAt, session.expiresAt) <= now ||
      user.deletedAt ||
      user.organization.deletedAt ||
      user.status !== 'active'
    ) {
      return { error: INVALID_REFRESH() };
    }
    // Slides with use, but never past SESSION_MAX_AGE (or the organization's session_max_age) after the sign-in.
    session.expiresAt = sessionExpiry(ctx, session.createdAt, now, maxAge);
    session.lastUsedAt = now;
    const refreshValue = newRefreshToken({ ...ctx, em }, session, now, session.expiresAt);
    const access = ctx.deps.tokens.sign(
      { sub: user.id, org: user.organization.id, sid: session.id },
      Math.floor(now.getTime() / 1000),
    );
    return { tokens: { access, refresh: refreshValue } };
  });
  // Errors are returned, not thrown, so that the reuse revocation above commits.
  if (result.error) throw result.error;
  return tokenResponse(result.tokens);
}

export async function logout(ctx: ActorContext): Promise<{ success: true; message: string }> {
  const now = ctx.deps.clock.now();
  await authRepositoryOf(ctx.deps).signOutSession(ctx.em, ctx.actor.sessionId, now);
  return { success: true, message: 'Logged out: this access token and its refresh token are revoked' };
}

/** The caller, as loaded with the token on this very request (no second query). */
export function me(ctx: ActorContext) {
  return { success: true as const, user: toUserSummaryDto(ctx.actor.user) };
}

/** Creates an organization on the starter plan with this user as its owner; does not log in. */
export async function createOrganizationWithOwner(
  deps: AppDeps,
  em: Em,
  input: { email: string; password: string; name: string; organizationName: string },
): Promise<User> {
  const email = input.email.toLowerCase();
  const passwordHash = await deps.passwords.hash(input.password);
  const now = deps.clock.now();
  const repository = authRepositoryOf(deps);
  return repository.transaction(em, async (tx) => {
    // A pending invitation elsewhere does not reserve the address; a sign-in account does (one per address).
    if (await repository.signInAccountExists(tx, email))
      throw conflict('A user with this email already exists: log in with POST /v1/auth/login instead');
    const org = repository.createOrganization(tx, {
      id: newId('org'),
      name: input.organizationName,
      plan: DEFAULT_PLAN,
    });
    await runOrganizationCreatedHooks(deps, tx, org, now);
    const user = repository.createUser(tx, {
      id: newId('usr'),
      organization: org,
      email,
      name: input.name,
      passwordHash,
      role: 'owner',
      status: 'active',
      permissions: [],
    });
    noteAuditActor(auditActor(user));
    repository.recordEvent(
      tx,
      userCreated,
      toUserDetailDto(user, { vpn_connections: 0, databases_created: 0, api_calls_30d: 0 }),
      org.id,
      now,
    );
    return user;
  });
}

export async function register(ctx: RequestContext, input: TRegisterInput): Promise<TLoginOutput> {
  if (!ctx.deps.config.signupEnabled) throw forbidden('Sign-up is disabled on this server');
  const user = await createOrganizationWithOwner(ctx.deps, ctx.em, {
    email: input.email,
    password: input.password,
    name: input.name,
    organizationName: input.organization_name,
  });
  const now = ctx.deps.clock.now();
  const repository = authRepositoryOf(ctx.deps);
  const tokens = await repository.transaction(ctx.em, async (em) => {
    const u = await repository.userWithOrganization(em, user.id);
    u.lastLogin = now;
    return issueSession({ ...ctx, em }, u);
  });
  return { ...tokenResponse(tokens), user: toUserSummaryDto(user) };
}

/** `OWNER_*` bootstrap at start: creates the organization and owner when the email is unknown. Idempotent. */
export async function bootstrapOwner(deps: AppDeps): Promise<void> {
  const owner = deps.config.owner;
  if (!owner) return;
  const repository = authRepositoryOf(deps);
  const em = repository.fork();
  if (await repository.signInAccountExists(em, owner.email)) return;
  try {
    await createOrganizationWithOwner(deps, em, owner);
    deps.log.info({ email: owner.email }, 'created owner account from OWNER_EMAIL');
  } catch (err) {
    // Another process started at the same moment and created it first.
    if (err instanceof AppError && err.code === 'CONFLICT') return;
    throw err;
  }
}

/** Deletes login sessions that expired or were revoked more than a day ago (a recurring job). */
export async function purgeExpiredSessions(deps: AppDeps): Promise<number> {
  const cutoff = new Date(deps.clock.now().getTime() - 86_400_000);
  return authRepositoryOf(deps).purgeSessions(cutoff);
}
