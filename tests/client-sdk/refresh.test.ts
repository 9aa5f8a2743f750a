// Test tier: server
import { expect } from 'chai';
import {
  AuthenticationError,
  createClient,
  type ClientOptions,
  type IssuedTokens,
  type PlatformClient,
} from '@cloud-platform/client';
import type { Clock } from '../../server/lib/time.js';
import { createOrg, type TestUser } from '../support/factories.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { rejection } from '../support/rejection.js';

const TWO_HOURS_MS = 2 * 3600_000;

/**
 * The server's clock, shifted on demand. Tokens issued while it runs two hours behind are already expired (they
 * live one hour), so expiry needs no waiting.
 */
class ShiftedClock implements Clock {
  offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
}

describe('client SDK: automatic token refresh', () => {
  const clock = new ShiftedClock();
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ clock });
  });
  after(async () => {
    await s?.close();
  });
  afterEach(() => {
    clock.offsetMs = 0;
  });

  /** A client whose access token is already expired, with its refresh token; every refresh call is counted. */
  async function expiredSession(user: TestUser, extra: Partial<ClientOptions> = {}) {
    const calls: string[] = [];
    const issued: IssuedTokens[] = [];
    const client = createClient({
      baseUrl: s.baseUrl,
      onTokens: (t) => void issued.push(t),
      fetch: (url, init) => {
        calls.push(new URL(url).pathname.replace('/trpc/', ''));
        return fetch(url, init);
      },
      ...extra,
    });
    clock.offsetMs = -TWO_HOURS_MS;
    const login = await client.login(user.email, user.password);
    clock.offsetMs = 0;
    calls.length = 0;
    issued.length = 0;
    return { client, calls, issued, login };
  }

  it('refreshes an expired access token once, stores the rotated pair, notifies onTokens and retries', async () => {
    const owner = await createOrg(s.deps);
    const { client, calls, issued, login } = await expiredSession(owner);

    const me = await client.auth.me.query();
    expect(me.user.id).to.equal(owner.id);
    expect(calls).to.deep.equal(['auth.me', 'auth.refresh', 'auth.me']);
    expect(issued).to.have.length(1);
    const [fresh] = issued;
    expect(fresh!.token).to.not.equal(login.token);
    expect(fresh!.refreshToken).to.match(/^rt_/).and.not.equal(login.refresh_token);
    expect(fresh!.expiresIn).to.equal(3600);
    expect(client.getTokens()).to.deep.equal({ token: fresh!.token, refreshToken: fresh!.refreshToken });

    // The new token is used from now on: no further refresh.
    await client.auth.me.query();
    expect(calls.slice(3)).to.deep.equal(['auth.me']);
  });

  it('refreshes a mutation too (the expired call did nothing, so it is safe to resend)', async () => {
    const owner = await createOrg(s.deps);
    const { client, calls } = await expiredSession(owner);
    const res = await client.auth.logout.mutate({});
    expect(res.success).to.equal(true);
    expect(calls).to.deep.equal(['auth.logout', 'auth.refresh', 'auth.logout']);
  });

  it('shares one refresh between concurrent calls that fail with the same expired token', async () => {
    const owner = await createOrg(s.deps);
    const { client, calls, issued } = await expiredSession(owner);

    const results = await Promise.all(Array.from({ length: 5 }, () => client.auth.me.query()));
    for (const r of results) expect(r.user.id).to.equal(owner.id);
    // Presenting the single-use refresh token twice would have revoked the session (reuse detection).
    expect(calls.filter((c) => c === 'auth.refresh')).to.have.length(1);
    expect(calls.filter((c) => c === 'auth.me')).to.have.length(10);
    expect(issued).to.have.length(1);
  });

  it('uses the rotated refresh token for the next refresh, and retries a call only once', async () => {
    const owner = await createOrg(s.deps);
    const issued: IssuedTokens[] = [];
    let armed = false;
    // Once the first refreshed pair is stored, the clock jumps two hours ahead: the retried call finds that
    // token expired as well, so the call fails after one retry instead of refreshing again.
    const { client, calls, login } = await expiredSession(owner, {
      onTokens: (t) => {
        if (!armed) return;
        issued.push(t);
        if (issued.length === 1) clock.offsetMs = TWO_HOURS_MS;
      },
    });
    armed = true;
    const err = await rejection(client.auth.me.query());
    expect(err).to.be.instanceOf(AuthenticationError);
    expect(err).to.include({ code: 'TOKEN_EXPIRED', status: 401 });
    expect(calls).to.deep.equal(['auth.me', 'auth.refresh', 'auth.me']);
    expect(issued).to.have.length(1);

    // The next call refreshes again with the rotated token (a reuse of the first one would be refused).
    const me = await client.auth.me.query();
    expect(me.user.id).to.equal(owner.id);
    expect(calls.slice(3)).to.deep.equal(['auth.me', 'auth.refresh', 'auth.me']);
    expect(issued).to.have.length(2);
    const refreshTokens = [login.refresh_token, issued[0]!.refreshToken, issued[1]!.refreshToken];
    expect(new Set(refreshTokens).size).to.equal(3);
    expect(client.getTokens()).to.deep.equal({
      token: issued[1]!.token,
      refreshToken: issued[1]!.refreshToken,
    });
  });

  it('rejects with TOKEN_EXPIRED (caused by the refused refresh) when the refresh token is no longer valid', async () => {
    const owner = await createOrg(s.deps);
    const { client, calls, issued, login } = await expiredSession(owner);
    // Someone else uses the refresh token first: the client's copy is now a reuse, and the session is revoked.
    const thief = createClient({ baseUrl: s.baseUrl });
    await thief.auth.refresh.mutate({ refresh_token: login.refresh_token });

    const err = await rejection(client.auth.me.query());
    expect(err).to.be.instanceOf(AuthenticationError);
    expect(err).to.include({ code: 'TOKEN_EXPIRED' });
    const cause = (err as AuthenticationError).cause;
    expect(cause).to.be.instanceOf(AuthenticationError);
    expect(cause).to.include({ code: 'INVALID_CREDENTIALS' });
    expect(issued).to.deep.equal([]);
    // The refused refresh token is forgotten, so later calls do not present it again.
    expect(client.getTokens().refreshToken).to.equal(undefined);
    await rejection(client.auth.me.query());
    expect(calls.filter((c) => c === 'auth.refresh')).to.have.length(1);
  });

  it('does not refresh without a refresh token', async () => {
    const owner = await createOrg(s.deps);
    const { client, calls } = await expiredSession(owner);
    client.setTokens({ token: client.getTokens().token });
    const err = await rejection(client.auth.me.query());
    expect(err).to.be.instanceOf(AuthenticationError);
    expect(err).to.include({ code: 'TOKEN_EXPIRED' });
    expect(calls).to.deep.equal(['auth.me']);
  });

  it('works with tokens the application keeps (getToken + onTokens)', async () => {
    const owner = await createOrg(s.deps);
    clock.offsetMs = -TWO_HOURS_MS;
    const seed = await createClient({ baseUrl: s.baseUrl }).login(owner.email, owner.password);
    clock.offsetMs = 0;

    const store = { token: seed.token, refreshToken: seed.refresh_token };
    let refreshes = 0;
    const client: PlatformClient = createClient({
      baseUrl: s.baseUrl,
      getToken: () => store.token,
      refreshToken: store.refreshToken,
      onTokens: async (t) => {
        refreshes++;
        store.token = t.token;
        store.refreshToken = t.refreshToken;
      },
    });
    expect((await client.auth.me.query()).user.id).to.equal(owner.id);
    expect(refreshes).to.equal(1);
    expect(store.token).to.not.equal(seed.token);
    expect((await client.auth.me.query()).user.id).to.equal(owner.id);
    expect(refreshes).to.equal(1);
  });
});
