// Test tier: server
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { AppError } from '../../../server/lib/errors.js';
import { SsoFailure } from '../../../server/modules/auth/sso-errors.js';
import {
  discoverIssuer,
  forgetDiscoveredIssuers,
  oidcAuthorizationUrl,
  oidcCallback,
  randomCodeVerifier,
  randomNonce,
  type OidcClientConfig,
  type OidcSignInChecks,
} from '../../../server/modules/auth/sso-oidc.js';
import { startOidcProvider, type TestOidcProvider } from '../../support/oidc-provider.js';
import { rejection } from '../../support/rejection.js';

// The OpenID Connect side of SSO (docs/sso.md) against a real provider on loopback, without the API: discovery,
// the authorization request, and every check of the callback.
const REDIRECT_URI = 'http://127.0.0.1:9/v1/auth/sso/oidc/callback';

function expectIssuerError(err: unknown, pattern: RegExp) {
  expect(err).to.be.instanceOf(AppError);
  const e = err as AppError;
  expect(e.code).to.equal('VALIDATION_ERROR');
  expect(e.details).to.have.length(1);
  expect(e.details![0]).to.include({ path: 'issuer' });
  expect((e.details![0] as { message: string }).message).to.match(pattern);
}

function expectFailure(err: unknown, code: string, pattern?: RegExp) {
  expect(err, String(err)).to.be.instanceOf(SsoFailure);
  expect((err as SsoFailure).code).to.equal(code);
  if (pattern) expect((err as SsoFailure).message).to.match(pattern);
}

/** A plain HTTP server answering every request with `answer`. */
async function fakeServer(answer: (path: string) => { status: number; body: string; delayMs?: number }) {
  const server: Server = createServer((req, res) => {
    const a = answer(req.url ?? '/');
    setTimeout(() => {
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(a.body);
    }, a.delayMs ?? 0);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

describe('SSO through OpenID Connect: the client (docs/sso.md)', () => {
  let idp: TestOidcProvider;
  let cfg: OidcClientConfig;
  before(async () => {
    idp = await startOidcProvider({ redirectUris: [REDIRECT_URI] });
    cfg = {
      issuer: idp.issuer,
      clientId: idp.client.clientId,
      clientSecret: idp.client.clientSecret,
      redirectUri: REDIRECT_URI,
      allowInsecure: true,
    };
  });
  after(() => idp.close());
  afterEach(() => {
    idp.onIdToken = undefined;
  });

  const checks = (): OidcSignInChecks => ({
    state: randomNonce(),
    nonce: randomNonce(),
    codeVerifier: randomCodeVerifier(),
  });

  /** Signs in at the provider as a new account with `claims`; the callback URL and the checks it goes with. */
  async function throughProvider(claims: Record<string, unknown>, c = cfg) {
    const expected = checks();
    const account = idp.addAccount(claims);
    const url = await oidcAuthorizationUrl(c, expected);
    const callback = await idp.authorize(url, account);
    return { callback, expected };
  }

  describe('discoverIssuer', () => {
    it("reads the provider's discovery document", async () => {
      const found = await discoverIssuer(idp.issuer, { allowInsecure: true });
      expect(found.issuer).to.equal(idp.issuer);
      expect(found.metadata.authorization_endpoint).to.equal(`${idp.issuer}/auth`);
      expect(found.metadata.jwks_uri).to.be.a('string');
    });

    it('refuses an http:// or loopback issuer unless private targets are allowed', async () => {
      expectIssuerError(await rejection(discoverIssuer(idp.issuer, { allowInsecure: false })), /https:\/\//);
      expectIssuerError(
        await rejection(discoverIssuer(idp.issuer.replace('http:', 'https:'), { allowInsecure: false })),
        /loopback/,
      );
      expectIssuerError(
        await rejection(discoverIssuer('https://169.254.169.254', { allowInsecure: true })),
        /metadata/,
      );
    });

    it('says why discovery failed: nothing listening, not found, another issuer, not JSON, too slow', async () => {
      const closed = await fakeServer(() => ({ status: 200, body: '{}' }));
      await closed.close();
      expectIssuerError(
        await rejection(discoverIssuer(closed.url, { allowInsecure: true })),
        /\.well-known\/openid-configuration failed: connection refused/,
      );

      const notFound = await fakeServer(() => ({ status: 404, body: '{"error":"not found"}' }));
      expectIssuerError(
        await rejection(discoverIssuer(notFound.url, { allowInsecure: true })),
        /HTTP status other than 200/,
      );
      await notFound.close();

      const other = await fakeServer(() => ({
        status: 200,
        body: JSON.stringify({ issuer: 'https://idp.example.com', authorization_endpoint: 'x' }),
      }));
      expectIssuerError(
        await rejection(discoverIssuer(other.url, { allowInsecure: true })),
        /another issuer/,
      );
      await other.close();

      const html = await fakeServer(() => ({ status: 200, body: '<html>' }));
      expectIssuerError(await rejection(discoverIssuer(html.url, { allowInsecure: true })), /not a JSON/);
      await html.close();
    });

    it('gives up on a provider that does not answer within its bound', async () => {
      const slow = await fakeServer(() => ({ status: 200, body: '{}', delayMs: 3000 }));
      const started = Date.now();
      expectIssuerError(
        await rejection(discoverIssuer(slow.url, { allowInsecure: true, timeoutMs: 300 })),
        /no answer within 0.3 s/,
      );
      expect(Date.now() - started).to.be.lessThan(2000);
      await slow.close();
    });

    it('refuses a discovery document without the endpoints a sign-in needs', async () => {
      let self = '';
      const partial = await fakeServer(() => ({
        status: 200,
        body: JSON.stringify({ issuer: self, authorization_endpoint: 'https://idp.example.com/auth' }),
      }));
      self = partial.url;
      expectIssuerError(
        await rejection(discoverIssuer(partial.url, { allowInsecure: true })),
        /no token_endpoint, jwks_uri/,
      );
      await partial.close();
    });
  });

  describe('oidcAuthorizationUrl', () => {
    it('asks for a code with PKCE S256, state, nonce and the openid email profile scope', async () => {
      const expected = checks();
      const url = new URL(await oidcAuthorizationUrl(cfg, expected));
      expect(url.origin + url.pathname).to.equal(`${idp.issuer}/auth`);
      const q = Object.fromEntries(url.searchParams);
      expect(q).to.include({
        client_id: idp.client.clientId,
        redirect_uri: REDIRECT_URI,
        response_type: 'code',
        scope: 'openid email profile',
        state: expected.state,
        nonce: expected.nonce,
        code_challenge_method: 'S256',
      });
      expect(q.code_challenge).to.match(/^[A-Za-z0-9_-]{43}$/);
      expect(q.code_challenge).not.to.equal(expected.codeVerifier);
    });
  });

  describe('oidcCallback', () => {
    it('answers the verified email, the subject and the name', async () => {
      const { callback, expected } = await throughProvider({
        sub: 'subject-1',
        email: 'Ada@Example.COM',
        email_verified: true,
        name: 'Ada',
      });
      const identity = await oidcCallback(cfg, callback, expected);
      expect(identity).to.deep.equal({
        email: 'ada@example.com',
        emailVerified: true,
        subject: 'subject-1',
        name: 'Ada',
      });
    });

    it('reads the email at the userinfo endpoint when the ID token does not carry it', async () => {
      const bare = await startOidcProvider({ redirectUris: [REDIRECT_URI], emailInIdToken: false });
      try {
        const c = { ...cfg, issuer: bare.issuer, clientSecret: bare.client.clientSecret };
        const expected = checks();
        let idTokenClaims: Record<string, unknown> = {};
        bare.onIdToken = (t) => {
          idTokenClaims = bare.decode(t).payload;
          return t;
        };
        const account = bare.addAccount({ email: 'grace@example.com', email_verified: true });
        const callback = await bare.authorize(await oidcAuthorizationUrl(c, expected), account);
        const identity = await oidcCallback(c, callback, expected);
        expect(idTokenClaims).not.to.have.property('email');
        expect(identity).to.include({ email: 'grace@example.com', subject: account });
      } finally {
        await bare.close();
      }
    });

    it('reads email_verified at the userinfo endpoint when the ID token carries the email alone', async () => {
      idp.onIdToken = (t) => idp.resign(t, { email_verified: undefined });
      const verified = await throughProvider({ email: 'v@example.com', email_verified: true });
      expect(await oidcCallback(cfg, verified.callback, verified.expected)).to.include({
        email: 'v@example.com',
      });
      const unverified = await throughProvider({ email: 'u@example.com', email_verified: false });
      expectFailure(
        await rejection(oidcCallback(cfg, unverified.callback, unverified.expected)),
        'SSO_EMAIL_NOT_VERIFIED',
      );
    });

    it('refuses a state that is not the sign-in’s, before anything is exchanged', async () => {
      const { callback, expected } = await throughProvider({ email: 'a@example.com', email_verified: true });
      const before = idp.tokenRequests;
      expectFailure(
        await rejection(oidcCallback(cfg, callback, { ...expected, state: randomNonce() })),
        'SSO_STATE_INVALID',
      );
      expect(idp.tokenRequests).to.equal(before);
    });

    it('refuses an ID token whose nonce is not the sign-in’s', async () => {
      const { callback, expected } = await throughProvider({ email: 'a@example.com', email_verified: true });
      expectFailure(
        await rejection(oidcCallback(cfg, callback, { ...expected, nonce: randomNonce() })),
        'SSO_ASSERTION_INVALID',
        /nonce/,
      );
    });

    it('refuses a code exchanged without its PKCE verifier', async () => {
      const { callback, expected } = await throughProvider({ email: 'a@example.com', email_verified: true });
      expectFailure(
        await rejection(oidcCallback(cfg, callback, { ...expected, codeVerifier: randomCodeVerifier() })),
        'SSO_IDP_ERROR',
        /invalid_grant/,
      );
    });

    it('refuses an ID token changed after signing, signed by another key, or for another client', async () => {
      const cases: [string, (t: string) => string, RegExp][] = [
        [
          'tampered',
          (t) => idp.tamper(t, { email: 'mallory@example.com' }),
          /could not be verified|not valid/,
        ],
        ['foreign key', (t) => idp.resign(t, {}, { key: 'foreign' }), /could not be verified|not valid/],
        ['other aud', (t) => idp.resign(t, { aud: idp.otherClient.clientId }), /audience/],
        ['other iss', (t) => idp.resign(t, { iss: 'https://idp.example.com' }), /issuer/],
        ['expired', (t) => idp.resign(t, { exp: Math.floor(Date.now() / 1000) - 3600 }), /expired/],
      ];
      for (const [name, change, pattern] of cases) {
        idp.onIdToken = change;
        const { callback, expected } = await throughProvider({
          email: 'a@example.com',
          email_verified: true,
        });
        const err = await rejection(oidcCallback(cfg, callback, expected));
        expect((err as SsoFailure).code, name).to.equal('SSO_ASSERTION_INVALID');
        expect((err as SsoFailure).message, name).to.match(pattern);
      }
    });

    it('refuses an ID token issued to another client of the provider', async () => {
      const other = {
        ...cfg,
        clientId: idp.otherClient.clientId,
        clientSecret: idp.otherClient.clientSecret,
      };
      const { callback, expected } = await throughProvider(
        { email: 'a@example.com', email_verified: true },
        other,
      );
      // The code was issued to the other client: this connection's client cannot exchange it.
      expectFailure(await rejection(oidcCallback(cfg, callback, expected)), 'SSO_IDP_ERROR', /invalid_grant/);
    });

    it('refuses an expired authorization code', async () => {
      const { callback, expected } = await throughProvider({ email: 'a@example.com', email_verified: true });
      idp.expireAuthorizationCodes();
      expectFailure(await rejection(oidcCallback(cfg, callback, expected)), 'SSO_IDP_ERROR', /invalid_grant/);
    });

    it('passes on the error the provider answered (the person cancelled)', async () => {
      const expected = checks();
      const account = idp.addAccount({ email: 'a@example.com', email_verified: true });
      const callback = await idp.authorize(await oidcAuthorizationUrl(cfg, expected), account, {
        abort: true,
      });
      expect(callback.searchParams.get('error')).to.equal('access_denied');
      expectFailure(await rejection(oidcCallback(cfg, callback, expected)), 'SSO_IDP_ERROR', /access_denied/);
    });

    it('refuses an email the provider has not verified, or no email at all', async () => {
      for (const verified of [false, undefined, 'true']) {
        const { callback, expected } = await throughProvider({
          email: 'a@example.com',
          email_verified: verified,
        });
        expectFailure(await rejection(oidcCallback(cfg, callback, expected)), 'SSO_EMAIL_NOT_VERIFIED');
      }
      const { callback, expected } = await throughProvider({ email_verified: true });
      expectFailure(
        await rejection(oidcCallback(cfg, callback, expected)),
        'SSO_ASSERTION_INVALID',
        /no email/,
      );
    });

    it('answers SSO_IDP_ERROR when the provider cannot be reached', async () => {
      forgetDiscoveredIssuers();
      const gone = await fakeServer(() => ({ status: 200, body: '{}' }));
      await gone.close();
      const expected = checks();
      const callback = new URL(`${REDIRECT_URI}?code=abc&state=${expected.state}`);
      expectFailure(
        await rejection(oidcCallback({ ...cfg, issuer: gone.url }, callback, expected)),
        'SSO_IDP_ERROR',
      );
    });
  });
});
