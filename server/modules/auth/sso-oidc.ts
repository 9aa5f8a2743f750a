import http from 'node:http';
import https from 'node:https';
import ipaddr from 'ipaddr.js';
import * as oidc from 'openid-client';
import { validation } from '../../lib/errors.js';
import { SsoFailure } from './sso-errors.js';
import {
  blockedAddressReason,
  BlockedAddressError,
  checkTargetUrl,
  guardedLookup,
  systemResolver,
  type AddressPolicy,
} from '../../lib/safe-http.js';

/**
 * OpenID Connect sign-in of an organization's connection (docs/sso.md): discovery of the issuer, the authorization
 * request (authorization code with PKCE S256, `state` and `nonce`) and the callback (the code exchanged at the token
 * endpoint, the ID token verified against the issuer's JWKS). No database here: the sign-in flow stores the state,
 * nonce and code verifier and hands them back.
 *
 * Every request to the identity provider goes to an address its owner chose, so it is made like a webhook delivery
 * (server/lib/safe-http.ts): only public addresses, checked again when connecting, never a redirect, a bounded time
 * and body. `allowInsecure` is the private-targets setting (`WEBHOOK_ALLOW_PRIVATE_TARGETS`, never in production): it
 * allows `http://` and loopback or private issuers, for tests and local identity providers.
 */

/** Discovery, token and JWKS requests each give up after this long. */
export const OIDC_REQUEST_TIMEOUT_MS = 5000;
/** An identity provider's answer is read up to this many bytes (discovery documents and JWKS are a few kB). */
const MAX_RESPONSE_BYTES = 512 * 1024;
/** A discovered issuer's metadata is kept this long for sign-ins (a connection's update discovers again). */
const DISCOVERY_CACHE_MS = 5 * 60_000;
/** Issuers kept at most (the oldest one goes first). */
const DISCOVERY_CACHE_MAX = 200;

export const OIDC_SCOPE = 'openid email profile';

export interface OidcIssuerOptions {
  /** Allow `http://` and loopback or private addresses (the private-targets setting; never in production). */
  allowInsecure: boolean;
  /** Each request to the provider gives up after this long ({@link OIDC_REQUEST_TIMEOUT_MS} unless given). */
  timeoutMs?: number;
}

/** What discovery found: the issuer's metadata (endpoints, JWKS URI, supported methods). */
export interface OidcIssuer {
  /** The issuer identifier, as the provider's metadata names it. */
  readonly issuer: string;
  readonly metadata: Readonly<oidc.ServerMetadata>;
}

/** A connection as the sign-in uses it. */
export interface OidcClientConfig extends OidcIssuerOptions {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** This API's callback: `<PUBLIC_BASE_URL>/v1/auth/sso/oidc/callback`. */
  redirectUri: string;
}

/** The values of one sign-in, stored by the flow between the authorization request and the callback. */
export interface OidcSignInChecks {
  state: string;
  nonce: string;
  codeVerifier: string;
}

// ---------- outbound requests ----------

/**
 * The fetch openid-client makes its requests with: the URL's literal address and every resolved address checked,
 * no redirect followed, the body read up to {@link MAX_RESPONSE_BYTES}, the whole exchange bounded in time.
 */
function guardedFetch(policy: AddressPolicy, timeoutMs: number): oidc.CustomFetch {
  const lookup = guardedLookup(systemResolver, policy);
  return (rawUrl, options) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(rawUrl);
      const literal = url.hostname.replace(/^\[|\]$/g, '');
      if (url.protocol !== 'https:' && !(policy.allowPrivate && url.protocol === 'http:')) {
        reject(new BlockedAddressError(`${url.origin} does not use https://`));
        return;
      }
      if (ipaddr.isValid(literal)) {
        const reason = blockedAddressReason(literal, policy);
        if (reason) {
          reject(new BlockedAddressError(`${url.host} is a ${reason}`));
          return;
        }
      }
      const req = (url.protocol === 'https:' ? https : http).request(url, {
        method: options.method,
        headers: options.headers,
        lookup,
        signal: options.signal ?? AbortSignal.timeout(timeoutMs),
        timeout: timeoutMs,
      });
      req.on('timeout', () =>
        req.destroy(Object.assign(new Error(`${url.origin} did not answer in time`), { code: 'ETIMEDOUT' })),
      );
      req.on('error', reject);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            res.destroy(new Error(`${url.origin} answered more than ${MAX_RESPONSE_BYTES} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(res.headers)) {
            if (value === undefined) continue;
            for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
          }
          const status = res.statusCode ?? 502;
          const body = status === 204 || status === 304 ? null : Buffer.concat(chunks);
          try {
            resolve(new Response(body, { status, headers }));
          } catch (err) {
            // A status the Fetch API cannot represent (below 200 or above 599).
            reject(err instanceof Error ? err : new Error(String(err)));
          }
        });
      });
      if (options.body === undefined || options.body === null) req.end();
      else if (typeof options.body === 'string' || options.body instanceof Uint8Array) req.end(options.body);
      else if (options.body instanceof URLSearchParams) req.end(options.body.toString());
      else if (options.body instanceof ArrayBuffer) req.end(Buffer.from(options.body));
      else reject(new Error('unsupported request body'));
    });
}

/** The options of every openid-client call of a connection. */
function requestOptions(opts: OidcIssuerOptions): oidc.DiscoveryRequestOptions {
  return {
    [oidc.customFetch]: guardedFetch({ allowPrivate: opts.allowInsecure }, timeoutOf(opts)),
    timeout: timeoutOf(opts) / 1000,
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- only with the private-targets setting (tests)
    execute: opts.allowInsecure ? [oidc.allowInsecureRequests] : [],
  };
}

const timeoutOf = (opts: OidcIssuerOptions) => opts.timeoutMs ?? OIDC_REQUEST_TIMEOUT_MS;

// ---------- discovery ----------

const discovered = new Map<string, { issuer: OidcIssuer; until: number }>();
/** The JWKS last fetched per issuer (refetched by openid-client when a token names a key it does not hold). */
const jwksCache = new Map<string, oidc.ExportedJWKSCache>();

function cacheKey(issuer: string, opts: OidcIssuerOptions): string {
  return `${opts.allowInsecure ? 'insecure' : 'secure'} ${issuer}`;
}

/** Why an error of discovery happened, in words for the one who configures the connection. */
function discoveryFailure(err: unknown, timeoutMs: number): string {
  if (err instanceof BlockedAddressError) return err.message;
  const e = err as { code?: string; message?: string; cause?: unknown };
  switch (e.code) {
    case 'OAUTH_TIMEOUT':
    case 'OAUTH_ABORT':
      return `no answer within ${timeoutMs / 1000} s`;
    case 'OAUTH_RESPONSE_IS_NOT_JSON':
    case 'OAUTH_PARSE_ERROR':
      return 'the answer is not a JSON discovery document';
    case 'OAUTH_RESPONSE_IS_NOT_CONFORM':
      return 'the answer is not a discovery document (HTTP status other than 200)';
    case 'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED':
      return 'the discovery document names another issuer (its "issuer" must be exactly this URL)';
    case 'OAUTH_INVALID_RESPONSE':
      return `the discovery document is not valid (${e.message ?? 'invalid'})`;
    default:
      break;
  }
  if (e.cause instanceof BlockedAddressError) return e.cause.message;
  const cause = e.cause as { code?: string; name?: string } | undefined;
  const code = cause?.code ?? e.code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code === 'ABORT_ERR' || code === 'ETIMEDOUT' || cause?.name === 'AbortError') {
    return `no answer within ${timeoutMs / 1000} s`;
  }
  return 'the issuer could not be reached';
}

/**
 * Fetches `<issuer>/.well-known/openid-configuration` and checks it (its `issuer` equal to the one given, the
 * endpoints the sign-in needs, `S256` PKCE when the provider lists its methods). Bounded in time; every failure is
 * a `400 VALIDATION_ERROR` on `issuer` saying why. Always asks the provider (a connection's update checks the issuer
 * as it is now) and refreshes the copy sign-ins use.
 */
export async function discoverIssuer(issuer: string, opts: OidcIssuerOptions): Promise<OidcIssuer> {
  const check = await checkTargetUrl(issuer, { allowPrivate: opts.allowInsecure });
  if (!check.ok) throw validation('issuer', `The issuer URL ${check.reason}`);
  const url = check.url;
  if (url.search || url.hash) throw validation('issuer', 'The issuer URL must not have a query or fragment');
  let config: oidc.Configuration;
  try {
    config = await oidc.discovery(url, 'discovery', undefined, oidc.None(), requestOptions(opts));
  } catch (err) {
    throw validation(
      'issuer',
      `OpenID Connect discovery at ${discoveryUrl(url)} failed: ${discoveryFailure(err, timeoutOf(opts))}`,
    );
  }
  const metadata = config.serverMetadata();
  const missing = (['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const).filter(
    (k) => typeof metadata[k] !== 'string',
  );
  if (missing.length > 0) {
    throw validation('issuer', `The discovery document has no ${missing.join(', ')}`);
  }
  for (const k of ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const) {
    const endpoint = checkUrlSyntaxOf(metadata[k]!, opts);
    if (endpoint) throw validation('issuer', `The discovery document's ${k} ${endpoint}`);
  }
  const methods = metadata.code_challenge_methods_supported;
  if (Array.isArray(methods) && !methods.includes('S256')) {
    throw validation('issuer', 'The identity provider does not support PKCE with S256');
  }
  const found: OidcIssuer = { issuer: metadata.issuer, metadata: { ...metadata } };
  remember(issuer, opts, found);
  return found;
}

function discoveryUrl(url: URL): string {
  return `${url.href.replace(/\/$/, '')}/.well-known/openid-configuration`;
}

/** Why an endpoint of the discovery document may not be used, or undefined. */
function checkUrlSyntaxOf(raw: string, opts: OidcIssuerOptions): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not an absolute URL';
  }
  if (url.protocol !== 'https:' && !(opts.allowInsecure && url.protocol === 'http:')) {
    return 'must use https://';
  }
  return undefined;
}

function remember(issuer: string, opts: OidcIssuerOptions, found: OidcIssuer): void {
  const key = cacheKey(issuer, opts);
  discovered.delete(key);
  discovered.set(key, { issuer: found, until: Date.now() + DISCOVERY_CACHE_MS });
  while (discovered.size > DISCOVERY_CACHE_MAX) {
    const oldest = discovered.keys().next().value;
    if (oldest === undefined) break;
    discovered.delete(oldest);
    jwksCache.delete(oldest);
  }
}

/** The issuer's metadata for a sign-in: the copy discovered in the last minutes, or a fresh discovery. */
async function issuerOf(issuer: string, opts: OidcIssuerOptions): Promise<OidcIssuer> {
  const hit = discovered.get(cacheKey(issuer, opts));
  if (hit && hit.until > Date.now()) return hit.issuer;
  return discoverIssuer(issuer, opts);
}

/** Forgets every discovered issuer (tests that change a provider between sign-ins). */
export function forgetDiscoveredIssuers(): void {
  discovered.clear();
  jwksCache.clear();
}

/** The client of a connection at its issuer: client_secret_basic unless the provider lists only client_secret_post. */
function clientOf(found: OidcIssuer, cfg: OidcClientConfig): oidc.Configuration {
  const methods = found.metadata.token_endpoint_auth_methods_supported;
  const auth =
    Array.isArray(methods) &&
    !methods.includes('client_secret_basic') &&
    methods.includes('client_secret_post')
      ? oidc.ClientSecretPost(cfg.clientSecret)
      : oidc.ClientSecretBasic(cfg.clientSecret);
  const config = new oidc.Configuration(
    found.metadata,
    cfg.clientId,
    { redirect_uris: [cfg.redirectUri], response_types: ['code'] },
    auth,
  );
  const options = requestOptions(cfg);
  config[oidc.customFetch] = options[oidc.customFetch]!;
  config.timeout = options.timeout;
  for (const run of options.execute ?? []) run(config);
  // The ID token's signature is checked against the issuer's JWKS even though it comes from the token endpoint
  // (docs/sso.md): a provider reached over plain HTTP, or through a proxy, proves nothing by its connection alone.
  oidc.enableNonRepudiationChecks(config);
  const jwks = jwksCache.get(cacheKey(cfg.issuer, cfg));
  if (jwks) oidc.setJwksCache(config, jwks);
  return config;
}

// ---------- authorization request ----------

/** The URL the browser is sent to: authorization code with PKCE S256, `state` and `nonce`, scope {@link OIDC_SCOPE}. */
export async function oidcAuthorizationUrl(cfg: OidcClientConfig, checks: OidcSignInChecks): Promise<string> {
  const config = clientOf(await issuerOf(cfg.issuer, cfg), cfg);
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: cfg.redirectUri,
    response_type: 'code',
    scope: OIDC_SCOPE,
    state: checks.state,
    nonce: checks.nonce,
    code_challenge: await oidc.calculatePKCECodeChallenge(checks.codeVerifier),
    code_challenge_method: 'S256',
  });
  return url.href;
}

/** A random PKCE code verifier (43 characters of base64url). */
export const randomCodeVerifier = (): string => oidc.randomPKCECodeVerifier();
/** A random nonce (base64url of 32 random bytes). */
export const randomNonce = (): string => oidc.randomNonce();

// ---------- callback ----------

/** What the identity provider says of the person signing in, once every check has passed. */
export interface OidcIdentity {
  /** Lower case. */
  email: string;
  /** Always true: an address the provider has not verified is refused (`SSO_EMAIL_NOT_VERIFIED`). */
  emailVerified: true;
  /** The provider's `sub`. */
  subject: string;
  name?: string;
}

/** At most this many characters of what the provider says are repeated to the person signing in. */
const MAX_PROVIDER_TEXT = 200;

function providerText(text: string | undefined | null): string {
  const clean = (text ?? '').replace(/[^\x20-\x7e]/g, ' ').trim();
  return clean.length > MAX_PROVIDER_TEXT ? `${clean.slice(0, MAX_PROVIDER_TEXT)}…` : clean;
}

/** A failure of the code exchange or of the ID token's checks, as the person signing in is told it. */
function callbackFailure(err: unknown): SsoFailure {
  if (err instanceof SsoFailure) return err;
  if (err instanceof oidc.AuthorizationResponseError) {
    const description = providerText(err.error_description);
    return new SsoFailure(
      'SSO_IDP_ERROR',
      `The identity provider refused the sign-in: ${providerText(err.error)}${description ? ` (${description})` : ''}`,
      { cause: err },
    );
  }
  if (err instanceof oidc.ResponseBodyError) {
    const description = providerText(err.error_description);
    return new SsoFailure(
      'SSO_IDP_ERROR',
      `The identity provider refused the authorization code: ${providerText(err.error)}${description ? ` (${description})` : ''}; sign in again`,
      { cause: err },
    );
  }
  const e = err as { code?: string; cause?: unknown; message?: string };
  const cause = e.cause as { code?: string; name?: string } | undefined;
  if (
    err instanceof BlockedAddressError ||
    e.cause instanceof BlockedAddressError ||
    e.code === 'OAUTH_TIMEOUT' ||
    e.code === 'OAUTH_ABORT' ||
    e.code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' ||
    e.code === 'OAUTH_RESPONSE_IS_NOT_JSON' ||
    (e.code === undefined && cause?.code !== undefined) ||
    cause?.name === 'AbortError'
  ) {
    return new SsoFailure('SSO_IDP_ERROR', 'The identity provider could not be reached or answered wrongly', {
      cause: err,
    });
  }
  const what: Record<string, string> = {
    OAUTH_JWT_CLAIM_COMPARISON_FAILED:
      'a claim of the ID token (issuer, audience or nonce) is not the expected one',
    OAUTH_JWT_TIMESTAMP_CHECK_FAILED: 'the ID token is expired or not yet valid',
    OAUTH_KEY_SELECTION_FAILED: "the ID token is not signed by a key of the identity provider's JWKS",
    OAUTH_INVALID_RESPONSE: 'the ID token or the response is not valid',
    OAUTH_PARSE_ERROR: 'the ID token cannot be read',
    OAUTH_UNSUPPORTED_OPERATION: 'the ID token uses an algorithm that is not supported',
  };
  return new SsoFailure(
    'SSO_ASSERTION_INVALID',
    `The identity provider's answer was refused: ${(e.code && what[e.code]) ?? 'it could not be verified'}`,
    { cause: err },
  );
}

/** A claim as a string, or undefined when absent or of another type. */
function stringClaim(claims: Record<string, unknown>, name: string): string | undefined {
  const v = claims[name];
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
}

/**
 * The browser's return from the identity provider (`currentUrl`, the callback URL with its query): the `state` must
 * be the sign-in's, the provider must not have answered an error, the code is exchanged (with the PKCE verifier)
 * and the ID token checked (signature by a key of the issuer's JWKS, `iss`, `aud`, `exp`, `nonce`). The email comes
 * from the ID token, or from the userinfo endpoint when the token does not carry it (likewise `email_verified`, for
 * the same address); it must be verified (`email_verified: true`). Any failure is an {@link SsoFailure}.
 */
export async function oidcCallback(
  cfg: OidcClientConfig,
  currentUrl: URL,
  expected: OidcSignInChecks,
): Promise<OidcIdentity> {
  if (currentUrl.searchParams.get('state') !== expected.state) {
    throw new SsoFailure('SSO_STATE_INVALID', 'The sign-in state does not match: start the sign-in again');
  }
  let found: OidcIssuer;
  try {
    found = await issuerOf(cfg.issuer, cfg);
  } catch (err) {
    throw new SsoFailure('SSO_IDP_ERROR', 'The identity provider could not be reached', { cause: err });
  }
  const config = clientOf(found, cfg);
  // The query as the provider sent it, on the registered redirect URI (the API may sit behind a proxy).
  const callbackUrl = new URL(cfg.redirectUri);
  callbackUrl.search = currentUrl.search;
  let claims: Record<string, unknown>;
  try {
    const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
      expectedState: expected.state,
      expectedNonce: expected.nonce,
      pkceCodeVerifier: expected.codeVerifier,
      idTokenExpected: true,
    });
    const idToken = tokens.claims();
    if (!idToken) throw new SsoFailure('SSO_ASSERTION_INVALID', 'The identity provider sent no ID token');
    claims = { ...idToken };
    if (stringClaim(claims, 'email') === undefined) {
      // Providers that keep the profile claims to userinfo (OpenID Connect Core, 5.4); its `sub` must match.
      const info = await oidc.fetchUserInfo(config, tokens.access_token, idToken.sub);
      claims = { ...info, sub: idToken.sub };
    } else if (claims.email_verified === undefined && found.metadata.userinfo_endpoint) {
      // The email without a word on its verification: userinfo may say it, for that same address.
      const info = await oidc.fetchUserInfo(config, tokens.access_token, idToken.sub).catch(() => undefined);
      if (info && stringClaim(info, 'email')?.toLowerCase() === stringClaim(claims, 'email')?.toLowerCase()) {
        claims.email_verified = info.email_verified;
      }
    }
  } catch (err) {
    throw callbackFailure(err);
  } finally {
    const jwks = oidc.getJwksCache(config);
    if (jwks && discovered.has(cacheKey(cfg.issuer, cfg))) jwksCache.set(cacheKey(cfg.issuer, cfg), jwks);
  }
  const email = stringClaim(claims, 'email')?.toLowerCase();
  if (!email || email.length > 254 || !/^[^@\s]+@[^@\s]+$/.test(email)) {
    throw new SsoFailure(
      'SSO_ASSERTION_INVALID',
      'The identity provider sent no email address for this account',
    );
  }
  if (claims.email_verified !== true) {
    throw new SsoFailure(
      'SSO_EMAIL_NOT_VERIFIED',
      `The identity provider has not verified the email address ${email}`,
    );
  }
  const subject = stringClaim(claims, 'sub');
  if (!subject) throw new SsoFailure('SSO_ASSERTION_INVALID', 'The ID token has no subject');
  const name = stringClaim(claims, 'name');
  return { email, emailVerified: true, subject, ...(name ? { name: name.slice(0, 200) } : {}) };
}
