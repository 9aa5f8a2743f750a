// Test tier: server
import { expect } from 'chai';
import { http, type HttpResult } from '../support/http.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { DEFAULT_PASSWORD, createOrg, uniqueEmail } from '../support/factories.js';
import { TEST_REDIS_URL, requireRedis, uniqueRedisPrefix } from '../support/redis.js';
import { expectError } from './envelope.js';

const LIMIT = 3;
const env = { AUTH_RATE_LIMIT: String(LIMIT), AUTH_RATE_LIMIT_WINDOW: '60s' };

function expectLimited(res: HttpResult): void {
  const err = expectError(res, 'RATE_LIMITED');
  expect(err.message).to.match(/3 per 60 s/);
  expect(Number(res.headers.get('retry-after'))).to.be.within(1, 60);
}

/**
 * The endpoints anyone may call are limited per client address and endpoint (docs/security.md, docs/api-conventions.md "Rate limits and quotas"): password spraying and bcrypt work from one address stop at AUTH_RATE_LIMIT per window.
 */
describe('per-address limits of the unauthenticated endpoints', function () {
  this.timeout(60_000);

  describe('one address (TRUST_PROXY unset)', () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer({ env });
    });
    after(async () => {
      await s?.close();
    });

    it('login: after AUTH_RATE_LIMIT attempts from one address, 429 RATE_LIMITED with Retry-After, even with the right password', async () => {
      const owner = await createOrg(s.deps);
      const login = (password: string, headers: Record<string, string> = {}) =>
        http(s.baseUrl, 'POST', '/v1/auth/login', { body: { email: owner.email, password }, headers });
      for (let i = 0; i < LIMIT; i++) {
        expectError(await login('wrong-password-1'), 'INVALID_CREDENTIALS');
      }
      expectLimited(await login(DEFAULT_PASSWORD));
      // X-Forwarded-For is not believed without TRUST_PROXY: still the same address.
      expectLimited(await login(DEFAULT_PASSWORD, { 'x-forwarded-for': '203.0.113.9' }));
      // The same limit on /trpc (one procedure, one budget).
      const trpc = await http(s.baseUrl, 'POST', '/trpc/auth.login', {
        body: { email: owner.email, password: DEFAULT_PASSWORD },
      });
      expect(trpc.status).to.equal(429);
      expect(trpc.body.error.data.code).to.equal('RATE_LIMITED');
    });

    it('register, refresh and invitation acceptance have their own budgets, each limited the same way', async () => {
      const cases: [string, () => unknown][] = [
        ['/v1/auth/refresh', () => ({ refresh_token: `rt_${'a'.repeat(43)}` })],
        ['/v1/auth/invitations/accept', () => ({ token: 'inv_unknown', password: DEFAULT_PASSWORD })],
        [
          '/v1/auth/register',
          () => ({
            email: uniqueEmail('limit'),
            password: DEFAULT_PASSWORD,
            name: 'Limit',
            organization_name: 'Limit Org',
          }),
        ],
      ];
      for (const [path, body] of cases) {
        for (let i = 0; i < LIMIT; i++) {
          const res = await http(s.baseUrl, 'POST', path, { body: body() });
          expect(res.status, `${path} #${i + 1}: ${res.text}`).to.not.equal(429);
        }
        const res = await http(s.baseUrl, 'POST', path, { body: body() });
        expectLimited(res);
      }
    });
  });

  describe('behind a proxy (TRUST_PROXY=true)', () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer({ env: { ...env, TRUST_PROXY: 'true' } });
    });
    after(async () => {
      await s?.close();
    });

    it('counts each forwarded client address on its own', async () => {
      const owner = await createOrg(s.deps);
      const login = (ip: string) =>
        http(s.baseUrl, 'POST', '/v1/auth/login', {
          body: { email: owner.email, password: 'wrong-password-1' },
          headers: { 'x-forwarded-for': ip },
        });
      for (let i = 0; i < LIMIT; i++) expectError(await login('198.51.100.7'), 'INVALID_CREDENTIALS');
      expectLimited(await login('198.51.100.7'));
      expectError(await login('198.51.100.8'), 'INVALID_CREDENTIALS');
    });
  });

  describe('several processes (REDIS_URL)', () => {
    let a: TestServer;
    let b: TestServer;
    before(async function () {
      await requireRedis(this);
      const shared = {
        ...env,
        REDIS_URL: TEST_REDIS_URL,
        REDIS_KEY_PREFIX: uniqueRedisPrefix('auth-limits'),
      };
      a = await startTestServer({ env: shared });
      b = await startTestServer({ env: shared });
    });
    after(async () => {
      await a?.close();
      await b?.close();
    });

    it('shares one budget per address across the processes', async () => {
      const refresh = (s: TestServer) =>
        http(s.baseUrl, 'POST', '/v1/auth/refresh', { body: { refresh_token: `rt_${'b'.repeat(43)}` } });
      expectError(await refresh(a), 'INVALID_CREDENTIALS');
      expectError(await refresh(b), 'INVALID_CREDENTIALS');
      expectError(await refresh(a), 'INVALID_CREDENTIALS');
      expectLimited(await refresh(b));
    });
  });
});
