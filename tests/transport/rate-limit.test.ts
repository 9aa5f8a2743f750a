// Test tier: server
import { expect } from 'chai';
import { apiUsageSince } from '../../server/limits/api-usage.js';
import { http, type HttpResult } from '../support/http.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { createOrg, signedIn } from '../support/factories.js';
import { FakeClock } from '../support/fake-clock.js';
import { expectError } from './envelope.js';

const POLICY = /^"burst";q=(\d+);w=10$/;
const STATE = /^"burst";r=(\d+);t=(\d+)$/;

function burstHeaders(res: HttpResult): { q: number; r: number; t: number } {
  const policy = POLICY.exec(res.headers.get('ratelimit-policy') ?? '');
  const state = STATE.exec(res.headers.get('ratelimit') ?? '');
  expect(policy, `RateLimit-Policy: ${res.headers.get('ratelimit-policy')}`).to.not.equal(null);
  expect(state, `RateLimit: ${res.headers.get('ratelimit')}`).to.not.equal(null);
  const t = Number(state![2]);
  expect(t).to.be.within(1, 10);
  return { q: Number(policy![1]), r: Number(state![1]), t };
}

describe('rate limits and API quotas (docs/api-conventions.md, "Rate limits and quotas")', () => {
  let s: TestServer;
  const clock = new FakeClock('2026-11-21T08:00:00.000Z');
  before(async () => {
    s = await startTestServer({ clock, env: { RATE_LIMIT_BURST: '3' } });
  });
  after(async () => {
    await s?.close();
  });

  const me = (token?: string) => http(s.baseUrl, 'GET', '/v1/auth/me', { token });
  const trpcMe = (token: string) => http(s.baseUrl, 'GET', '/trpc/auth.me', { token });

  describe('burst limit per login session', () => {
    it('announces the budget on every authenticated response, then answers 429 RATE_LIMITED with Retry-After', async () => {
      const owner = await createOrg(s.deps);
      const seen = [];
      for (let i = 0; i < 3; i++) {
        const res = i === 1 ? await trpcMe(owner.token) : await me(owner.token);
        expect(res.status).to.equal(200);
        seen.push(burstHeaders(res));
      }
      expect(seen.map((h) => [h.q, h.r])).to.deep.equal([
        [3, 2],
        [3, 1],
        [3, 0],
      ]);

      const limited = await me(owner.token);
      const err = expectError(limited, 'RATE_LIMITED');
      expect(err.message).to.match(/3 requests per 10 seconds/);
      const h = burstHeaders(limited);
      expect(h.r).to.equal(0);
      expect(limited.headers.get('retry-after')).to.equal(String(h.t));

      const trpc = await trpcMe(owner.token);
      expect(trpc.status).to.equal(429);
      expect(trpc.body.error.data.code).to.equal('RATE_LIMITED');
      expect(Number(trpc.headers.get('retry-after'))).to.be.within(1, 10);
      expect(burstHeaders(trpc).r).to.equal(0);

      let thrown: any;
      await s
        .caller(owner.token)
        .auth.me()
        .catch((e: unknown) => (thrown = e));
      expect(thrown?.cause?.code).to.equal('RATE_LIMITED');

      // A token renewed by refresh belongs to the same login: same budget.
      const renewed = await http(s.baseUrl, 'POST', '/v1/auth/refresh', {
        body: { refresh_token: owner.refreshToken },
      });
      expect(renewed.status).to.equal(200);
      expectError(await me(renewed.body.token), 'RATE_LIMITED');

      // Another login has its own budget.
      const other = await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: owner.email, password: owner.password },
      });
      expect((await me(other.body.token)).status).to.equal(200);

      // Refused requests are rate-limit hits, not API calls.
      const usage = await apiUsageSince(s.deps.db.orm.em.fork(), {
        organizationId: owner.organizationId,
        since: clock.now(),
      });
      expect(usage).to.deep.equal({ calls: 4, rateLimited: 4 });
    });

    it('sends no rate-limit headers to unauthenticated requests', async () => {
      for (const res of [
        await me(),
        await me('forged.token.value'),
        await http(s.baseUrl, 'GET', '/healthz'),
      ]) {
        expect(res.headers.get('ratelimit')).to.equal(null);
        expect(res.headers.get('ratelimit-policy')).to.equal(null);
      }
    });
  });

  describe('monthly quota of the plan', () => {
    async function seed(organizationId: string, userId: string, count: number) {
      await s.deps.db.orm.em
        .fork()
        .execute(
          'insert into api_calls_daily (organization_id, user_id, day, "count") values (?, ?, ?::date, ?)',
          [organizationId, userId, '2026-11-02', count],
        );
    }

    it('answers 429 QUOTA_EXCEEDED past 10000 calls on starter, until the calendar month ends', async () => {
      clock.set('2026-11-21T08:00:00.000Z');
      const owner = await createOrg(s.deps, { plan: 'starter' });
      await seed(owner.organizationId, owner.id, 9_999);
      expect((await me(owner.token)).status).to.equal(200);

      const over = await me(owner.token);
      const err = expectError(over, 'QUOTA_EXCEEDED');
      expect(err.message).to.match(/10000/);
      // 2026-11-21T08:00Z → 2026-12-01T00:00Z
      expect(over.headers.get('retry-after')).to.equal(String(9 * 86_400 + 16 * 3600));
      burstHeaders(over);
      const trpc = await trpcMe(owner.token);
      expect(trpc.status).to.equal(429);
      expect(trpc.body.error.data.code).to.equal('QUOTA_EXCEEDED');
      expect(trpc.headers.get('retry-after')).to.equal(String(9 * 86_400 + 16 * 3600));

      // Any user of the organization is refused: the quota belongs to the organization.
      clock.set('2026-11-30T23:59:59.000Z');
      const again = signedIn(await s.caller().auth.login({ email: owner.email, password: owner.password }));
      const last = await me(again.token);
      expectError(last, 'QUOTA_EXCEEDED');
      expect(last.headers.get('retry-after')).to.equal('1');

      clock.set('2026-12-01T00:00:00.000Z');
      const fresh = signedIn(await s.caller().auth.login({ email: owner.email, password: owner.password }));
      expect((await me(fresh.token)).status).to.equal(200);
    });

    it('allows 100000 calls on pro and no limit on enterprise', async () => {
      clock.set('2026-11-21T08:00:00.000Z');
      const pro = await createOrg(s.deps, { plan: 'pro' });
      await seed(pro.organizationId, pro.id, 99_999);
      expect((await me(pro.token)).status).to.equal(200);
      expectError(await me(pro.token), 'QUOTA_EXCEEDED');

      const enterprise = await createOrg(s.deps, { plan: 'enterprise' });
      await seed(enterprise.organizationId, enterprise.id, 50_000_000);
      expect((await me(enterprise.token)).status).to.equal(200);
      expect((await me(enterprise.token)).status).to.equal(200);
    });

    it('counts calls flushed by other processes once the total is re-read', async () => {
      clock.set('2026-11-21T08:00:00.000Z');
      const owner = await createOrg(s.deps, { plan: 'starter' });
      expect((await me(owner.token)).status).to.equal(200);
      // Another process sharing the database has used the rest of the quota.
      await seed(owner.organizationId, 'usr_elsewhere', 9_999);
      clock.advance(60_000);
      await s.deps.apiUsage.flush();
      const session2 = signedIn(
        await s.caller().auth.login({ email: owner.email, password: owner.password }),
      );
      expectError(await me(session2.token), 'QUOTA_EXCEEDED');
    });
  });
});
