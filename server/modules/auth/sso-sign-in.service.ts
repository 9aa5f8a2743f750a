import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { toUserDetailDto, toUserSummaryDto } from '../../access/user.dto.js';
import type { User } from '../../access/user.entity.js';
import { userCreated, userLogin, userUpdated } from '../../access/user.events.js';
import { initialPermissions } from '../../access/permissions.js';
import { noteAuditActor, writeAuditEntry, type AuditRequest } from '../../events/audit.js';
import type { AppDeps, RequestContext } from '../../kit/deps.js';
import { decryptSecret, randomToken, sha256Hex } from '../../lib/crypto.js';
import { invalidCredentials, notFound, serviceUnavailable, validation } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { PLANS, type PlanId } from '../../lib/plans.js';
import { authRepositoryOf } from './auth.repository.js';
import { auditActor, issueSession, tokenResponse } from './login-completion.js';
import type { TLoginOutput } from './auth.schema.js';
import { SSO_FAILURE_STATUS, SsoFailure } from './sso-errors.js';
import type { SsoConnection, SsoSignIn } from './sso.entity.js';
import { oidcAuthorizationUrl, randomCodeVerifier, randomNonce } from './sso-oidc.js';
import { samlAuthorizeUrl } from './sso-saml.js';
import { ssoServiceProvider } from './sso.dto.js';
import { ssoRepositoryOf } from './sso.repository.js';
import type { TSsoStartInput, TSsoStartOutput, TSsoTokenInput } from './sso-sign-in.schema.js';

/**
 * A sign-in through the organization's identity provider (docs/sso.md, "Signing in"): `POST /auth/sso/start` routes
 * an email to the organization that verified its domain and answers the IdP's address; the IdP sends the browser back
 * to the OIDC callback or the SAML ACS, which check the IdP's answer (sso-oidc.ts, sso-saml.ts) and hand the identity
 * to {@link finishSignIn}; that one finds or makes the user and answers a one-time code, which
 * `POST /auth/sso/token` exchanges for the body of `POST /auth/login`.
 */

/** How long a sign-in may take at the IdP. */
export const SSO_SIGN_IN_TTL_MS = 10 * 60_000;
/** How long the one-time code of a finished sign-in is good for. */
export const SSO_CODE_TTL_MS = 60_000;
/** The prefix of one-time codes. */
const CODE_PREFIX = 'ssoc_';

/** The one answer of `POST /auth/sso/start` for every email no connection signs in. */
const noConnection = () => notFound('Single sign-on connection for this email address');

const INVALID_CODE = () =>
  invalidCredentials(
    'Invalid, used or expired single sign-on code: sign in again with POST /v1/auth/sso/start',
  );

/** The domain of an address: what follows its last `@`, lower-cased. */
export const emailDomainOf = (email: string) => email.slice(email.lastIndexOf('@') + 1).toLowerCase();

// ---------- return_to ----------

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]']);

/**
 * `return_to` checked (docs/sso.md, "Signing in"): an `http://127.0.0.1:<port>/…` or `http://[::1]:<port>/…` address (a
 * command-line client's own listener) or an address at an origin of `SSO_RETURN_ORIGINS`; no credentials, no
 * fragment (the code is added to its query). Anything else is a 400 on `return_to`.
 */
export function checkReturnTo(deps: AppDeps, returnTo: string): string {
  let url: URL;
  try {
    url = new URL(returnTo);
  } catch {
    throw validation('return_to', 'Must be an absolute URL');
  }
  if (url.username || url.password || url.hash || returnTo.includes('#')) {
    throw validation('return_to', 'Must not carry credentials or a fragment');
  }
  const loopback = url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname) && url.port !== '';
  if (!loopback && !deps.config.ssoReturnOrigins.includes(url.origin)) {
    throw validation(
      'return_to',
      'Must be http://127.0.0.1:<port>/… or http://[::1]:<port>/…, or an address at an origin of SSO_RETURN_ORIGINS',
    );
  }
  return url.href;
}

// ---------- start ----------

/** Whether single sign-on may sign in through `connection` now: its organization is live and on a plan with it. */
function connectionUsable(connection: SsoConnection): boolean {
  const org = connection.organization;
  const plan: PlanId = org.plan;
  return !org.deletedAt && PLANS[plan].features.sso === true;
}

/** `POST /auth/sso/start`: the IdP's address for the organization that verified the email's domain. */
export async function startSso(ctx: RequestContext, input: TSsoStartInput): Promise<TSsoStartOutput> {
  const returnTo = input.return_to === undefined ? null : checkReturnTo(ctx.deps, input.return_to);
  const repository = ssoRepositoryOf(ctx.deps);
  const route = await repository.findSignInRouteByEmailDomain(ctx.em, emailDomainOf(input.email));
  if (!route || !connectionUsable(route.connection)) throw noConnection();
  const { connection, organizationId } = route;
  // In the audit log of the organization, as its user of that address when it has one (an unknown one names no one).
  const account = await authRepositoryOf(ctx.deps).findSignInAccount(ctx.em, input.email);
  if (account && account.organization.id === organizationId) noteAuditActor(auditActor(account));
  const sp = ssoServiceProvider(ctx.deps.config.publicBaseUrl, organizationId);
  const state = randomToken('', 256);
  let authorizationUrl: string;
  let checks: { nonce: string | null; codeVerifier: string | null; requestId: string | null };
  try {
    if (connection.protocol === 'oidc') {
      const nonce = randomNonce();
      const codeVerifier = randomCodeVerifier();
      authorizationUrl = await oidcAuthorizationUrl(
        {
          issuer: connection.issuer!,
          clientId: connection.clientId!,
          clientSecret: decryptSecret(ctx.deps.keys.secrets, connection.clientSecret!),
          redirectUri: sp.redirectUri,
          allowInsecure: ctx.deps.config.webhook.allowPrivateTargets,
        },
        { state, nonce, codeVerifier },
      );
      checks = { nonce, codeVerifier, requestId: null };
    } else {
      const saml = await samlAuthorizeUrl(
        {
          idpEntityId: connection.idpEntityId,
          idpSsoUrl: connection.idpSsoUrl!,
          idpCertificate: connection.idpCertificate!,
          spEntityId: sp.entityId,
          acsUrl: sp.acsUrl,
        },
        { relayState: state },
      );
      authorizationUrl = saml.url;
      checks = { nonce: null, codeVerifier: null, requestId: saml.requestId };
    }
  } catch (err) {
    ctx.deps.log.warn({ err, organizationId }, 'single sign-on: the identity provider could not be reached');
    throw serviceUnavailable(
      'The identity provider of this organization could not be reached: try again later',
    );
  }
  const now = ctx.deps.clock.now();
  await repository.transaction(ctx.em, async (tx) => {
    repository.createSignIn(tx, {
      id: newId('ssi'),
      now,
      organizationId,
      stateHash: sha256Hex(state),
      protocol: connection.protocol,
      ...checks,
      returnTo,
      expiresAt: new Date(now.getTime() + SSO_SIGN_IN_TTL_MS),
    });
    await repository.flush(tx);
  });
  return { success: true, authorization_url: authorizationUrl };
}

// ---------- the IdP's answer ----------

/** What the callback or the ACS answers the browser: a redirect to `return_to`, or a page. */
export interface SsoAnswer {
  status: number;
  contentType: string;
  body: string;
  headers: Record<string, string>;
}

/** What the IdP said of the person signing in, once its answer checked out. */
export interface SsoIdentity {
  email: string;
  /** False when the IdP says the address is not verified (OIDC `email_verified`); absent: not said (SAML). */
  emailVerified?: boolean;
  name?: string;
}

/** Who made the request (the audit entries of a user made or an invitation accepted). */
export type SsoRequest = Partial<AuditRequest>;

/**
 * Uses up the sign-in of `state` (the OIDC `state`, the SAML `RelayState`): unused, not older than ten minutes, and
 * marked used at once (a second use is refused whatever happens next). Throws SsoFailure `SSO_STATE_INVALID`.
 */
export async function consumeSsoState(deps: AppDeps, state: unknown): Promise<SsoSignIn> {
  if (typeof state !== 'string' || state === '' || state.length > 512) throw stateInvalid();
  const repository = ssoRepositoryOf(deps);
  const signIn = await repository.transaction(repository.fork(), (tx) =>
    repository.consumeSignIn(tx, sha256Hex(state), deps.clock.now()),
  );
  if (!signIn) throw stateInvalid();
  return signIn;
}

const stateInvalid = () =>
  new SsoFailure(
    'SSO_STATE_INVALID',
    'This sign-in is unknown, was used already or is older than 10 minutes: start again',
  );

/**
 * The end of a sign-in whose IdP answer checked out (the OIDC callback, the SAML ACS), for the sign-in `signIn`
 * (consumed, {@link consumeSsoState}): the email must be in a verified domain of the sign-in's organization; its user
 * there signs in (an invited one becomes active), a suspended or removed one is refused, an address with an account
 * in another organization is refused, and an unknown one gets a user made just in time (`default_role`, no password,
 * `user.created`). Then a one-time code (60 s), sent to `return_to` or shown on a page. Every refusal is an answer
 * too (`?error=` or a page), and creates nothing. `assertion` (SAML) is remembered in the same transaction, and a
 * replay refused.
 */
export async function finishSignIn(
  deps: AppDeps,
  signIn: SsoSignIn,
  identity: SsoIdentity,
  opts: { assertion?: { id: string; notOnOrAfter: Date }; request?: SsoRequest } = {},
): Promise<SsoAnswer> {
  try {
    const code = await signInUser(deps, signIn, identity, opts);
    return ssoSuccessAnswer(signIn.returnTo ?? null, code);
  } catch (err) {
    if (err instanceof SsoFailure) return ssoFailureAnswer(signIn.returnTo ?? null, err);
    throw err;
  }
}

/** The user of the sign-in found or made, and its one-time code; throws SsoFailure. */
async function signInUser(
  deps: AppDeps,
  signIn: SsoSignIn,
  identity: SsoIdentity,
  opts: { assertion?: { id: string; notOnOrAfter: Date }; request?: SsoRequest },
): Promise<string> {
  if (identity.emailVerified === false) {
    throw new SsoFailure(
      'SSO_EMAIL_NOT_VERIFIED',
      'The identity provider does not say this email address is verified',
    );
  }
  const email = identity.email.trim().toLowerCase();
  const organizationId = signIn.organization.id;
  const code = randomToken(CODE_PREFIX, 256);
  const run = () =>
    ssoRepositoryOf(deps).transaction(ssoRepositoryOf(deps).fork(), (tx) =>
      signInUserIn(deps, tx, { organizationId, email, identity, code, ...opts }),
    );
  try {
    await run();
  } catch (err) {
    // Two first sign-ins of one address at once: the second finds the user the first made.
    if (!isUniqueViolation(err)) throw err;
    await run();
  }
  return code;
}

async function signInUserIn(
  deps: AppDeps,
  tx: RequestContext['em'],
  a: {
    organizationId: string;
    email: string;
    identity: SsoIdentity;
    code: string;
    assertion?: { id: string; notOnOrAfter: Date };
    request?: SsoRequest;
  },
): Promise<void> {
  const sso = ssoRepositoryOf(deps);
  const auth = authRepositoryOf(deps);
  const now = deps.clock.now();
  // The organization read again under a share lock: a deletion waits, and a deleted one signs nobody in.
  const org = await auth.lockOrganizationShared(tx, a.organizationId);
  const connection = org && !org.deletedAt ? await sso.findConnection(tx, a.organizationId) : null;
  if (!connection || !connectionUsable(connection)) {
    throw new SsoFailure(
      'SSO_STATE_INVALID',
      'Single sign-on is no longer set up for this organization: sign in another way',
    );
  }
  if (
    a.assertion &&
    !(await sso.rememberAssertion(tx, a.organizationId, a.assertion.id, a.assertion.notOnOrAfter, now))
  ) {
    throw new SsoFailure('SSO_ASSERTION_INVALID', 'This assertion was used already: sign in again');
  }
  if (
    !a.email.includes('@') ||
    !(await sso.isVerifiedDomainOf(tx, a.organizationId, emailDomainOf(a.email)))
  ) {
    throw new SsoFailure(
      'SSO_DOMAIN_NOT_ALLOWED',
      'This email address is not in a verified domain of the organization the sign-in started for',
    );
  }
  const request: AuditRequest = {
    requestId: a.request?.requestId ?? newId('req'),
    ip: a.request?.ip ?? '',
    userAgent: a.request?.userAgent,
  };
  const audit = async (action: string, user: User) => {
    if (!deps.config.auditLogEnabled) return;
    await writeAuditEntry(tx, { action, actor: auditActor(user), request, status: 200, now });
  };
  const account = await auth.findSignInAccount(tx, a.email);
  const takenElsewhere = () =>
    new SsoFailure(
      'SSO_EMAIL_TAKEN',
      'This email address has an account in another organization: sign in to that one, or ask for the address to be freed',
    );
  let user = await sso.lockOrganizationUser(tx, a.organizationId, a.email);
  if (user) {
    if (user.status === 'suspended') throw userDisabled();
    if (user.status === 'invited') {
      // The IdP's sign-in accepts the invitation: the user becomes active with the invited role.
      if (account && account.organization.id !== a.organizationId) throw takenElsewhere();
      user.status = 'active';
      sso.recordEvent(tx, userUpdated, toUserDetailDto(user, NO_ACTIVITY), a.organizationId, now);
      await audit('auth.sso_invitation_accepted', user);
    }
  } else {
    if (await sso.removedUserExists(tx, a.organizationId, a.email)) throw userDisabled();
    if (account) throw takenElsewhere();
    // Just in time: the organization's new user, with the connection's default role and no password.
    user = auth.createUser(tx, {
      id: newId('usr'),
      organization: org!,
      email: a.email,
      name: userName(a.identity, a.email),
      passwordHash: null,
      role: connection.defaultRole,
      status: 'active',
      permissions: initialPermissions(connection.defaultRole),
    });
    sso.recordEvent(tx, userCreated, toUserDetailDto(user, NO_ACTIVITY), a.organizationId, now);
    await audit('auth.sso_user_created', user);
  }
  sso.createCode(tx, {
    id: newId('ssc'),
    now,
    user,
    codeHash: sha256Hex(a.code),
    expiresAt: new Date(now.getTime() + SSO_CODE_TTL_MS),
  });
  await sso.flush(tx);
}

const NO_ACTIVITY = { vpn_connections: 0, databases_created: 0, api_calls_30d: 0 };

const userDisabled = () =>
  new SsoFailure(
    'SSO_USER_DISABLED',
    'This user is suspended or was removed from the organization: ask an owner or an admin',
  );

/** The name the IdP gave, else the address's local part; at most 200 characters. */
function userName(identity: SsoIdentity, email: string): string {
  const name = identity.name?.trim() || email.slice(0, email.lastIndexOf('@'));
  return name.slice(0, 200);
}

function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: unknown } | null;
  return err instanceof UniqueConstraintViolationException || e?.code === '23505';
}

// ---------- answers to the browser ----------

/** Answers that carry a code are never cached nor sent on as a referrer. */
const PRIVATE_HEADERS = { 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' };
const PAGE_HEADERS = {
  ...PRIVATE_HEADERS,
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
};

function redirect(returnTo: string, params: Record<string, string>): SsoAnswer {
  const url = new URL(returnTo);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return {
    status: 302,
    contentType: 'text/plain; charset=utf-8',
    body: '',
    headers: { ...PRIVATE_HEADERS, Location: url.href },
  };
}

const HTML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
export const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);

function page(status: number, title: string, paragraphs: string[]): SsoAnswer {
  const body = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem}code{font-size:1.1rem;word-break:break-all;background:#f3f3f3;padding:.2rem .4rem}</style></head>
<body><h1>${escapeHtml(title)}</h1>
${paragraphs.map((p) => `<p>${p}</p>`).join('\n')}
</body>
</html>
`;
  return { status, contentType: 'text/html; charset=utf-8', body, headers: PAGE_HEADERS };
}

/** A finished sign-in: `return_to?code=<code>`, or a page showing the code. */
export function ssoSuccessAnswer(returnTo: string | null, code: string): SsoAnswer {
  if (returnTo) return redirect(returnTo, { code });
  return page(200, 'Signed in', [
    `Your one-time code: <code>${escapeHtml(code)}</code>`,
    'Give it to the application that started the sign-in within 60 seconds (POST /v1/auth/sso/token). It works once.',
  ]);
}

/** A refused sign-in: `return_to?error=<code>&error_description=<message>`, or a page showing both. */
export function ssoFailureAnswer(returnTo: string | null, failure: SsoFailure): SsoAnswer {
  if (returnTo) return redirect(returnTo, { error: failure.code, error_description: failure.message });
  return page(SSO_FAILURE_STATUS[failure.code], 'Sign-in refused', [
    `<code>${escapeHtml(failure.code)}</code>`,
    escapeHtml(failure.message),
  ]);
}

// ---------- token ----------

/**
 * `POST /auth/sso/token`: the one-time code used up (once, within 60 seconds) for a session opened by single sign-on,
 * with no two-factor step (the IdP signed the user in), and the body of `POST /auth/login`; `user.login`.
 */
export async function exchangeSsoCode(ctx: RequestContext, input: TSsoTokenInput): Promise<TLoginOutput> {
  if (!input.code.startsWith(CODE_PREFIX)) throw INVALID_CODE();
  const now = ctx.deps.clock.now();
  const sso = ssoRepositoryOf(ctx.deps);
  const auth = authRepositoryOf(ctx.deps);
  const done = await sso.transaction(ctx.em, async (tx) => {
    const code = await sso.consumeCode(tx, sha256Hex(input.code), now);
    if (!code) return null;
    const user = code.user;
    // The organization under a share lock (a deletion waits); a user suspended or removed since gets nothing.
    const org = await auth.lockOrganizationShared(tx, user.organization.id);
    if (!org || org.deletedAt || user.deletedAt || user.status !== 'active') return null;
    noteAuditActor(auditActor(user));
    user.lastLogin = now;
    const tokens = issueSession({ ...ctx, em: tx }, user, 'sso');
    auth.recordEvent(tx, userLogin, toUserSummaryDto(user), org.id, now);
    return { tokens, user };
  });
  if (!done) throw INVALID_CODE();
  return { ...tokenResponse(done.tokens), user: toUserSummaryDto(done.user) };
}

// ---------- housekeeping ----------

/** Deletes sign-ins, codes and remembered SAML assertions that expired before `now`. */
export async function purgeExpiredSso(deps: AppDeps, now: Date): Promise<number> {
  const n = await ssoRepositoryOf(deps).purgeExpired(now);
  return n.signIns + n.codes + n.assertions;
}
