import { generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

/**
 * A real OpenID Connect provider (oidc-provider) on 127.0.0.1:<random port> in the test process, for the sign-in
 * through SSO (docs/sso.md). Its clients redirect to the API's callback; its accounts carry the claims a test chooses;
 * `signIn` plays the browser with plain HTTP (redirects followed by hand, a cookie jar, the login and consent forms
 * posted) and answers what the API's callback answered.
 *
 * For tests that attack: `otherClient` (a second client, another `aud`), `onIdToken` (rewrites the ID token of the
 * token endpoint's answers: `resign` with other claims or another key, `tamper` without signing again),
 * `expireAuthorizationCodes` (every code issued so far expires), `abort` (the person cancels at the provider, which
 * answers `error=access_denied`). The issuer is `http://`: the API accepts it only with the private-targets setting.
 */

export interface OidcTestClient {
  clientId: string;
  clientSecret: string;
}

/** Claims of an account; `sub` is its id unless given. */
export interface OidcTestClaims {
  sub?: string;
  email?: string;
  email_verified?: unknown;
  name?: string;
}

export interface DecodedJwt {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
}

export interface SignInResult {
  /** The callback URL the provider sent the browser to (on the API), with its query. */
  callbackUrl: URL;
  /** The API's answer to it. */
  status: number;
  location: string | null;
  body: string;
}

export interface TestOidcProvider {
  issuer: string;
  /** The client the organization's connection uses. */
  client: OidcTestClient;
  /** Another client of the same provider (ID tokens with another `aud`). */
  otherClient: OidcTestClient;
  /** Adds or replaces an account; returns its id (the login to type at the provider). */
  addAccount(claims: OidcTestClaims, id?: string): string;
  /** Rewrites the `id_token` of every token response while set (`undefined`: untouched). */
  onIdToken: ((idToken: string) => string) | undefined;
  /** Header and payload of a JWT (no check). */
  decode(jwt: string): DecodedJwt;
  /** The JWT with `changes` merged into its payload, signed again by the provider's key or by a key of nobody's JWKS. */
  resign(jwt: string, changes: Record<string, unknown>, opts?: { key?: 'provider' | 'foreign' }): string;
  /** The JWT with `changes` merged into its payload and its original signature kept (no longer valid). */
  tamper(jwt: string, changes: Record<string, unknown>): string;
  /** Every authorization code issued so far is past its expiry. */
  expireAuthorizationCodes(): void;
  /** Token requests received (to assert a code was or was not exchanged). */
  tokenRequests: number;
  /**
   * Plays the browser from the API's `authorization_url`: the provider's pages (login as `accountId`, consent), then
   * the callback, requested at `apiBaseUrl` (the API's listening address; the redirect URI is the public one).
   * `abort: true` cancels at the login page instead.
   */
  signIn(
    authorizationUrl: string,
    accountId: string,
    opts: { apiBaseUrl: string; abort?: boolean },
  ): Promise<SignInResult>;
  /** The provider's pages only: the callback URL the browser is sent to, not requested. */
  authorize(authorizationUrl: string, accountId: string, opts?: { abort?: boolean }): Promise<URL>;
  /** Requests a callback URL at the API (a browser following the provider's redirect, or an attacker replaying it). */
  followCallback(callbackUrl: URL, apiBaseUrl: string): Promise<SignInResult>;
  close(): Promise<void>;
}

export interface OidcProviderOptions {
  /** The API's callback URLs (`<PUBLIC_BASE_URL>/v1/auth/sso/oidc/callback`). */
  redirectUris: string[];
  /**
   * Email claims in the ID token (default), or only at the userinfo endpoint, as OpenID Connect Core 5.4 has it
   * for claims asked for by scope.
   */
  emailInIdToken?: boolean;
}

const b64url = (data: Buffer | string) => Buffer.from(data).toString('base64url');

function rsaKey(kid: string): { privateKey: KeyObject; jwk: Record<string, unknown> } {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { privateKey, jwk: { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' } };
}

function signRs256(header: Record<string, unknown>, payload: Record<string, unknown>, key: KeyObject) {
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
  return `${input}.${b64url(sign('sha256', Buffer.from(input), key))}`;
}

/** The provider's storage: every model in one map, so a test can reach the codes it issued. */
function memoryStorage() {
  const rows = new Map<string, { payload: Record<string, unknown>; until?: number }>();
  const key = (model: string, id: string) => `${model}:${id}`;
  class Adapter {
    constructor(private readonly model: string) {}
    upsert(id: string, payload: Record<string, unknown>, expiresIn?: number): Promise<void> {
      rows.set(key(this.model, id), {
        payload,
        until: expiresIn ? Date.now() + expiresIn * 1000 : undefined,
      });
      return Promise.resolve();
    }
    find(id: string): Promise<Record<string, unknown> | undefined> {
      const row = rows.get(key(this.model, id));
      return Promise.resolve(
        row && (row.until === undefined || row.until > Date.now()) ? row.payload : undefined,
      );
    }
    findByUid(uid: string): Promise<Record<string, unknown> | undefined> {
      for (const [k, row] of rows) {
        if (k.startsWith(`${this.model}:`) && row.payload.uid === uid) return Promise.resolve(row.payload);
      }
      return Promise.resolve(undefined);
    }
    findByUserCode(userCode: string): Promise<Record<string, unknown> | undefined> {
      for (const [k, row] of rows) {
        if (k.startsWith(`${this.model}:`) && row.payload.userCode === userCode)
          return Promise.resolve(row.payload);
      }
      return Promise.resolve(undefined);
    }
    consume(id: string): Promise<void> {
      const row = rows.get(key(this.model, id));
      if (row) row.payload.consumed = Math.floor(Date.now() / 1000);
      return Promise.resolve();
    }
    destroy(id: string): Promise<void> {
      rows.delete(key(this.model, id));
      return Promise.resolve();
    }
    revokeByGrantId(grantId: string): Promise<void> {
      for (const [k, row] of rows) if (row.payload.grantId === grantId) rows.delete(k);
      return Promise.resolve();
    }
  }
  return {
    Adapter,
    expire(model: string) {
      for (const [k, row] of rows) {
        if (k.startsWith(`${model}:`)) row.payload.exp = Math.floor(Date.now() / 1000) - 60;
      }
    },
  };
}

/** Cookies of one origin, as a browser keeps them (name → value; an empty or expired cookie is dropped). */
class CookieJar {
  readonly #cookies = new Map<string, string>();
  store(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';');
      const eq = pair.indexOf('=');
      if (eq < 1) continue;
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired = attributes.some((a) => {
        const [k = '', v = ''] = a.trim().split('=');
        if (k.toLowerCase() === 'max-age') return Number(v) <= 0;
        if (k.toLowerCase() === 'expires') return Date.parse(v) <= Date.now();
        return false;
      });
      if (!value || expired) this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
  }
  header(): string {
    return [...this.#cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

const unescapeHtml = (s: string) =>
  s
    .replace(/&amp;/g, '&')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&#x2F;/g, '/');

export async function startOidcProvider(opts: OidcProviderOptions): Promise<TestOidcProvider> {
  const server: Server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const accounts = new Map<string, OidcTestClaims>();
  const signing = rsaKey(`provider-${randomBytes(4).toString('hex')}`);
  const foreign = rsaKey(signing.jwk.kid as string);
  const storage = memoryStorage();
  const client: OidcTestClient = { clientId: 'api-sso', clientSecret: randomBytes(24).toString('hex') };
  const otherClient: OidcTestClient = {
    clientId: 'other-app',
    clientSecret: randomBytes(24).toString('hex'),
  };
  const clientMetadata = (c: OidcTestClient) => ({
    client_id: c.clientId,
    client_secret: c.clientSecret,
    redirect_uris: opts.redirectUris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
  });

  // devInteractions (the provider's own login and consent pages) warn once on the console: not news in a test.
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].startsWith('oidc-provider WARNING')) return;
    warn(...args);
  };
  let provider: Provider;
  try {
    provider = new Provider(issuer, {
      adapter: storage.Adapter,
      clients: [clientMetadata(client), clientMetadata(otherClient)],
      jwks: { keys: [signing.jwk] },
      cookies: { keys: [randomBytes(16).toString('hex')] },
      claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
      conformIdTokenClaims: opts.emailInIdToken === false,
      pkce: { required: () => true },
      ttl: {
        AuthorizationCode: 60,
        Interaction: 600,
        Session: 3600,
        Grant: 3600,
        AccessToken: 600,
        IdToken: 600,
      },
      features: { devInteractions: { enabled: true } },
      findAccount: (_ctx: unknown, id: string) => {
        const claims = accounts.get(id);
        if (!claims) return undefined;
        return {
          accountId: id,
          claims: () => Promise.resolve({ ...claims, sub: claims.sub ?? id }),
        };
      },
    });
  } finally {
    console.warn = warn;
  }

  const harness: TestOidcProvider = {
    issuer,
    client,
    otherClient,
    onIdToken: undefined,
    tokenRequests: 0,
    addAccount(claims, id = claims.sub ?? `account-${randomBytes(6).toString('hex')}`) {
      accounts.set(id, claims);
      return id;
    },
    decode(jwt) {
      const [h = '', p = ''] = jwt.split('.');
      return {
        header: JSON.parse(Buffer.from(h, 'base64url').toString()) as Record<string, unknown>,
        payload: JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>,
      };
    },
    resign(jwt, changes, o = {}) {
      const { header, payload } = harness.decode(jwt);
      const key = o.key === 'foreign' ? foreign.privateKey : signing.privateKey;
      return signRs256({ ...header, alg: 'RS256' }, { ...payload, ...changes }, key);
    },
    tamper(jwt, changes) {
      const [h = '', , s = ''] = jwt.split('.');
      const { payload } = harness.decode(jwt);
      return `${h}.${b64url(JSON.stringify({ ...payload, ...changes }))}.${s}`;
    },
    expireAuthorizationCodes() {
      storage.expire('AuthorizationCode');
    },
    async authorize(authorizationUrl, accountId, o = {}) {
      const jar = new CookieJar();
      let url = new URL(authorizationUrl);
      for (let step = 0; step < 20; step++) {
        if (url.origin !== issuer) return url;
        const res = await fetch(url, { redirect: 'manual', headers: { cookie: jar.header() } });
        jar.store(res);
        const location = res.headers.get('location');
        if (res.status >= 300 && res.status < 400 && location) {
          url = new URL(location, url);
          continue;
        }
        const page = await res.text();
        if (res.status !== 200)
          throw new Error(`The provider answered ${res.status} at ${url.pathname}: ${page}`);
        const action = /<form[^>]*action="([^"]+)"/.exec(page)?.[1];
        const prompt = /name="prompt" value="([a-z]+)"/.exec(page)?.[1];
        if (!action || !prompt) throw new Error(`No form at ${url.pathname}: ${page.slice(0, 500)}`);
        if (o.abort) {
          const abortUrl = /href="([^"]*\/abort)"/.exec(page)?.[1];
          if (!abortUrl) throw new Error('No abort link on the provider page');
          url = new URL(unescapeHtml(abortUrl), url);
          continue;
        }
        const form: Record<string, string> =
          prompt === 'login' ? { prompt, login: accountId, password: 'any password' } : { prompt };
        const posted = await fetch(new URL(unescapeHtml(action), url), {
          method: 'POST',
          redirect: 'manual',
          headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams(form).toString(),
        });
        jar.store(posted);
        const next = posted.headers.get('location');
        if (!next)
          throw new Error(
            `The provider answered ${posted.status} to the ${prompt} form: ${await posted.text()}`,
          );
        url = new URL(next, url);
      }
      throw new Error('Too many redirects at the provider');
    },
    async followCallback(callbackUrl, apiBaseUrl) {
      const res = await fetch(`${apiBaseUrl}${callbackUrl.pathname}${callbackUrl.search}`, {
        redirect: 'manual',
      });
      return {
        callbackUrl,
        status: res.status,
        location: res.headers.get('location'),
        body: await res.text(),
      };
    },
    async signIn(authorizationUrl, accountId, o) {
      const callbackUrl = await harness.authorize(authorizationUrl, accountId, { abort: o.abort });
      return harness.followCallback(callbackUrl, o.apiBaseUrl);
    },
    close: () =>
      new Promise<void>((done, fail) => {
        server.closeAllConnections();
        server.close((err) => (err ? fail(err) : done()));
      }),
  };

  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path !== '/token' || ctx.method !== 'POST') return;
    harness.tokenRequests++;
    const body = ctx.body as { id_token?: string } | undefined;
    if (ctx.status === 200 && body?.id_token && harness.onIdToken) {
      ctx.body = { ...body, id_token: harness.onIdToken(body.id_token) };
    }
  });
  server.on('request', provider.callback());
  return harness;
}
