// Test tier: server
import { createServer } from 'node:net';
import { expect } from 'chai';
import {
  AuthenticationError,
  ConflictError,
  ConnectionError,
  InternalServerError,
  NotFoundError,
  PermissionError,
  PlatformApiError,
  RateLimitError,
  ServiceUnavailableError,
  ValidationError,
  createClient,
  type IssuedTokens,
} from '@cloud-platform/client';
import { DEFAULT_PASSWORD, createOrg, createUser, uniqueEmail } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { rejection } from '../support/rejection.js';

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const address = srv.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

describe('client SDK against a live server', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  describe('calls', () => {
    it('logs in, stores the pair, reports it through onTokens, and calls authed procedures', async () => {
      const owner = await createOrg(s.deps);
      const issued: IssuedTokens[] = [];
      const client = createClient({ baseUrl: s.baseUrl, onTokens: (t) => void issued.push(t) });

      const res = await client.login(owner.email, owner.password);
      expect(res).to.include({ success: true, token_type: 'Bearer', expires_in: 3600 });
      expect(res.user).to.include({ id: owner.id, email: owner.email, role: 'owner' });
      expect(issued).to.deep.equal([{ token: res.token, refreshToken: res.refresh_token, expiresIn: 3600 }]);
      expect(client.getTokens()).to.deep.equal({ token: res.token, refreshToken: res.refresh_token });

      const me = await client.auth.me.query();
      expect(me.success).to.equal(true);
      expect(me.user).to.include({ id: owner.id, email: owner.email, organization_id: owner.organizationId });
    });

    it('uses a token given at creation, or the one getToken returns on each call', async () => {
      const owner = await createOrg(s.deps);
      const withToken = createClient({ baseUrl: s.baseUrl, token: owner.token });
      expect((await withToken.auth.me.query()).user.id).to.equal(owner.id);

      const store: { token?: string } = {};
      const withGetter = createClient({ baseUrl: s.baseUrl, getToken: async () => store.token });
      expect(await rejection(withGetter.auth.me.query())).to.be.instanceOf(AuthenticationError);
      store.token = owner.token;
      expect((await withGetter.auth.me.query()).user.id).to.equal(owner.id);
    });

    it('exposes the raw procedures: register through auth.register.mutate, then setTokens', async () => {
      const client = createClient({ baseUrl: s.baseUrl });
      const email = uniqueEmail('sdk');
      const res = await client.auth.register.mutate({
        email,
        password: DEFAULT_PASSWORD,
        name: 'Ada',
        organization_name: 'Analytical Engines',
      });
      expect(res.user).to.include({ email, role: 'owner' });
      client.setTokens({ token: res.token, refreshToken: res.refresh_token });
      expect((await client.auth.me.query()).user.email).to.equal(email);
    });

    it('accepts a base URL ending in /v1 (the REST base) and sends calls to /trpc', async () => {
      const owner = await createOrg(s.deps);
      const urls: string[] = [];
      const client = createClient({
        baseUrl: `${s.baseUrl}/v1/`,
        token: owner.token,
        fetch: (url, init) => {
          urls.push(url);
          return fetch(url, init);
        },
      });
      expect((await client.auth.me.query()).user.id).to.equal(owner.id);
      expect(urls).to.have.length(1);
      expect(new URL(urls[0]!).pathname).to.equal('/trpc/auth.me');
    });

    it('logout revokes the token server-side and forgets the stored pair', async () => {
      const owner = await createOrg(s.deps);
      const client = createClient({ baseUrl: s.baseUrl });
      const { token } = await client.login(owner.email, owner.password);
      const res = await client.logout();
      expect(res.success).to.equal(true);
      expect(client.getTokens()).to.deep.equal({ token: undefined, refreshToken: undefined });

      const other = createClient({ baseUrl: s.baseUrl, token });
      const err = await rejection(other.auth.me.query());
      expect(err).to.be.instanceOf(AuthenticationError);
      expect(err).to.include({ code: 'UNAUTHORIZED', status: 401 });
    });
  });

  describe('typed errors', () => {
    it('401 without a token: AuthenticationError UNAUTHORIZED with the request id', async () => {
      const client = createClient({ baseUrl: s.baseUrl });
      const err = await rejection(client.auth.me.query());
      expect(err).to.be.instanceOf(AuthenticationError).and.instanceOf(PlatformApiError);
      const e = err as AuthenticationError;
      expect(e).to.include({ code: 'UNAUTHORIZED', status: 401, name: 'AuthenticationError' });
      expect(e.requestId).to.match(/^req_/);
      expect(e.message).to.be.a('string').and.not.empty;
    });

    it('401 for a wrong password: AuthenticationError INVALID_CREDENTIALS, nothing stored', async () => {
      const owner = await createOrg(s.deps);
      const issued: IssuedTokens[] = [];
      const client = createClient({ baseUrl: s.baseUrl, onTokens: (t) => void issued.push(t) });
      const err = await rejection(client.login(owner.email, 'not-the-password'));
      expect(err).to.be.instanceOf(AuthenticationError);
      expect(err).to.include({ code: 'INVALID_CREDENTIALS', status: 401 });
      expect(issued).to.deep.equal([]);
      expect(client.getTokens()).to.deep.equal({ token: undefined, refreshToken: undefined });
    });

    it('400 for invalid input: ValidationError with details per field', async () => {
      const client = createClient({ baseUrl: s.baseUrl });
      const err = await rejection(
        client.auth.register.mutate({
          email: 'not-an-email',
          password: DEFAULT_PASSWORD,
          name: 'Ada',
          organization_name: 'Org',
        }),
      );
      expect(err).to.be.instanceOf(ValidationError);
      const e = err as ValidationError;
      expect(e).to.include({ code: 'VALIDATION_ERROR', status: 400 });
      expect(e.details).to.be.an('array');
      expect(e.details!.map((d) => (d as { path: string }).path)).to.include('email');
    });

    it('400 for an unknown field sent past the types', async () => {
      const client = createClient({ baseUrl: s.baseUrl });
      const input = { email: 'a@example.test', password: 'x', admin: true };
      const err = await rejection(client.auth.login.mutate(input));
      expect(err).to.be.instanceOf(ValidationError);
      expect((err as ValidationError).details).to.deep.include({ path: 'admin', message: 'Unknown field' });
    });

    it('403 for a member listing users: PermissionError FORBIDDEN', async () => {
      const owner = await createOrg(s.deps);
      const member = await createUser(s.deps, owner.organizationId, { role: 'member' });
      const client = createClient({ baseUrl: s.baseUrl, token: member.token });
      const err = await rejection(client.users.list.query({}));
      expect(err).to.be.instanceOf(PermissionError);
      expect(err).to.include({ code: 'FORBIDDEN', status: 403 });
    });

    it("404 for an unknown id and for another organization's user: NotFoundError", async () => {
      const owner = await createOrg(s.deps);
      const stranger = await createOrg(s.deps);
      const client = createClient({ baseUrl: s.baseUrl, token: owner.token });
      for (const id of ['usr_doesnotexist', stranger.id]) {
        const err = await rejection(client.users.get.query({ id }));
        expect(err).to.be.instanceOf(NotFoundError);
        expect(err).to.include({ code: 'NOT_FOUND', status: 404 });
      }
      expect((await client.users.get.query({ id: owner.id })).user.id).to.equal(owner.id);
    });

    it('404 for a procedure the server does not have: NotFoundError', async () => {
      const client = createClient({ baseUrl: s.baseUrl });
      const untyped = client as unknown as { nothing: { here: { query(): Promise<unknown> } } };
      const err = await rejection(untyped.nothing.here.query());
      expect(err).to.be.instanceOf(NotFoundError);
      expect(err).to.include({ code: 'NOT_FOUND', status: 404 });
    });

    it('409 for a duplicate registration: ConflictError', async () => {
      const owner = await createOrg(s.deps);
      const client = createClient({ baseUrl: s.baseUrl });
      const err = await rejection(
        client.auth.register.mutate({
          email: owner.email,
          password: DEFAULT_PASSWORD,
          name: 'Again',
          organization_name: 'Again',
        }),
      );
      expect(err).to.be.instanceOf(ConflictError);
      expect(err).to.include({ code: 'CONFLICT', status: 409 });
    });

    it('429 after repeated failed logins: RateLimitError with retryAfter', async () => {
      const owner = await createOrg(s.deps);
      const client = createClient({ baseUrl: s.baseUrl });
      for (let i = 0; i < 10; i++) {
        expect(await rejection(client.login(owner.email, 'wrong-password'))).to.include({
          code: 'INVALID_CREDENTIALS',
        });
      }
      const err = await rejection(client.login(owner.email, owner.password));
      expect(err).to.be.instanceOf(RateLimitError);
      const e = err as RateLimitError;
      expect(e).to.include({ code: 'TOO_MANY_LOGIN_ATTEMPTS', status: 429 });
      expect(e.retryAfter)
        .to.be.a('number')
        .within(1, 15 * 60);
    });

    it('no response at all: ConnectionError with status 0', async () => {
      const client = createClient({ baseUrl: `http://127.0.0.1:${await closedPort()}` });
      const err = await rejection(client.auth.me.query());
      expect(err).to.be.instanceOf(ConnectionError).and.instanceOf(PlatformApiError);
      expect(err).to.include({ code: 'CONNECTION_ERROR', status: 0 });
    });

    it('an aborted call: ConnectionError', async () => {
      const owner = await createOrg(s.deps);
      const client = createClient({ baseUrl: s.baseUrl, token: owner.token });
      const ac = new AbortController();
      ac.abort();
      const err = await rejection(client.auth.me.query(undefined, { signal: ac.signal }));
      expect(err).to.be.instanceOf(ConnectionError);
      expect((err as ConnectionError).message).to.match(/aborted/);
    });

    it('a response that is not the API (a proxy error page): the error class of its status', async () => {
      const page = (status: number) => async () =>
        new Response('<html>upstream unavailable</html>', {
          status,
          headers: { 'content-type': 'text/html', 'retry-after': '7' },
        });
      const bad = createClient({ baseUrl: s.baseUrl, fetch: page(502) });
      const e502 = await rejection(bad.auth.me.query());
      expect(e502).to.be.instanceOf(InternalServerError);
      expect(e502).to.include({ status: 502, code: 'INTERNAL_ERROR' });

      const down = createClient({ baseUrl: s.baseUrl, fetch: page(503) });
      expect(await rejection(down.auth.me.query())).to.be.instanceOf(ServiceUnavailableError);

      const limited = createClient({ baseUrl: s.baseUrl, fetch: page(429) });
      const e429 = await rejection(limited.auth.me.query());
      expect(e429).to.be.instanceOf(RateLimitError);
      expect((e429 as RateLimitError).retryAfter).to.equal(7);
    });
  });
});
