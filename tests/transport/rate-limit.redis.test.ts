// Test tier: server
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { ApiUsage } from '../../server/limits/api-usage.js';
import { SharedLimits } from '../../server/limits/shared-limits.js';
import { http } from '../support/http.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { createOrg, signedIn } from '../support/factories.js';
import { FakeClock } from '../support/fake-clock.js';
import {
  PrivateRedis,
  TEST_REDIS_URL,
  capturingLogger,
  deleteRedisKeys,
  redisClient,
  redisServerAvailable,
  requireRedis,
  uniqueRedisPrefix,
} from '../support/redis.js';
import { freePort } from '../support/ports.js';
import { waitFor } from '../support/wait.js';
import { expectError } from './envelope.js';

/** The login session of an access token (its `sid` claim): the key of its burst window. */
function sessionOf(token: string): string {
  return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { sid: string }).sid;
}

const UNREACHABLE = /^Redis is unreachable/;
const BACK = /^Redis is reachable again/;

/**
 * With REDIS_URL (docs/api-conventions.md, "Rate limits and quotas"; docs/deploying.md): the burst windows and the monthly quota
 * counters are kept in Redis, so that they hold exactly across processes; without Redis the process falls back to its
 * own limits, and says so. The same behaviour across real server processes: tests/scale/multi-process.test.ts.
 */
describe('rate limits and quotas shared through Redis (REDIS_URL)', function () {
  this.timeout(60_000);
  const prefix = uniqueRedisPrefix('limits');
  const clock = new FakeClock('2026-11-21T08:00:00.000Z');
  let burstServer: TestServer;
  let quotaServer: TestServer;
  let redis: Redis;
  const env = (extra: Record<string, string>) => ({
    REDIS_URL: TEST_REDIS_URL,
    REDIS_KEY_PREFIX: prefix,
    ...extra,
  });

  before(async function () {
    await requireRedis(this);
    redis = redisClient();
    // One after the other: on PostgreSQL they share the run's database, which the first one migrates.
    burstServer = await startTestServer({ clock, env: env({ RATE_LIMIT_BURST: '3' }) });
    quotaServer = await startTestServer({ clock, env: env({}) });
  });
  after(async () => {
    await Promise.all([burstServer?.close(), quotaServer?.close()]);
    // Nothing was written when the suite was skipped for want of Redis.
    if (redis) await deleteRedisKeys(prefix);
    redis?.disconnect();
  });

  const me = (s: TestServer, token: string) => http(s.baseUrl, 'GET', '/v1/auth/me', { token });

  /** Another process's view of the same limits: its own Redis connection and counters, the same database. */
  async function otherProcess(
    s: TestServer,
    burstLimit: number,
  ): Promise<{ usage: ApiUsage; close(): Promise<void> }> {
    const shared = await SharedLimits.connect({
      url: TEST_REDIS_URL,
      keyPrefix: prefix,
      burstLimit,
      burstWindowSeconds: 10,
      log: s.deps.log,
    });
    const usage = new ApiUsage(s.deps.db, clock, s.deps.log, burstLimit, shared);
    return {
      usage,
      async close() {
        await usage.stop();
        await shared.close();
      },
    };
  }

  it('keeps the burst window in Redis: one budget, whichever process counts', async () => {
    const owner = await createOrg(burstServer.deps);
    const sid = sessionOf(owner.token);
    expect((await me(burstServer, owner.token)).status).to.equal(200);
    expect(await redis.get(`${prefix}burst:${sid}`)).to.equal('1');

    const other = await otherProcess(burstServer, 3);
    try {
      // The other process takes the second request of the window; this one has one left, then none.
      const second = await other.usage.consumeBurst(sid, owner.organizationId, owner.id);
      expect([second.allowed, second.remaining]).to.deep.equal([true, 1]);
      const third = await me(burstServer, owner.token);
      expect(third.status).to.equal(200);
      expect(third.headers.get('ratelimit')).to.match(/^"burst";r=0;t=\d+$/);
      const limited = await me(burstServer, owner.token);
      expectError(limited, 'RATE_LIMITED');
      expect(Number(limited.headers.get('retry-after'))).to.be.within(1, 10);
      expect((await other.usage.consumeBurst(sid, owner.organizationId, owner.id)).allowed).to.equal(false);

      // Spread over both, a fresh login gets exactly its 3 requests.
      const login = signedIn(
        await burstServer.caller().auth.login({ email: owner.email, password: owner.password }),
      );
      const fresh = sessionOf(login.token);
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          (i % 2 === 0 ? burstServer.deps.apiUsage : other.usage).consumeBurst(
            fresh,
            owner.organizationId,
            owner.id,
          ),
        ),
      );
      expect(answers.filter((a) => a.allowed)).to.have.length(3);
    } finally {
      await other.close();
    }
  });

  it('counts the monthly quota in Redis, seeded from the database: exact under concurrency, refusals not counted', async () => {
    clock.set('2026-11-21T08:00:00.000Z');
    const owner = await createOrg(quotaServer.deps, { plan: 'starter' });
    await quotaServer.deps.db.orm.em
      .fork()
      .execute(
        'insert into api_calls_daily (organization_id, user_id, day, "count") values (?, ?, ?::date, ?)',
        [owner.organizationId, owner.id, '2026-11-02', 9_990],
      );
    const key = `${prefix}quota:${owner.organizationId}:2026-11`;
    expect(await redis.exists(key)).to.equal(0);

    const other = await otherProcess(quotaServer, 10_000);
    try {
      // 10 calls left; 25 requests at once, through HTTP and through the other process.
      const outcomes = await Promise.all(
        Array.from({ length: 25 }, async (_, i) => {
          if (i % 2 === 0) return (await me(quotaServer, owner.token)).status;
          const burst = await other.usage.consumeBurst(
            sessionOf(owner.token),
            owner.organizationId,
            owner.id,
          );
          return other.usage.admit(owner.organizationId, owner.id, 'starter', burst).then(
            () => 200,
            (err: { code?: string }) => (err.code === 'QUOTA_EXCEEDED' ? 429 : 500),
          );
        }),
      );
      expect(outcomes.filter((s) => s === 200)).to.have.length(10);
      expect(outcomes.filter((s) => s === 429)).to.have.length(15);
      // The counter holds the admitted calls only.
      expect(await redis.get(key)).to.equal('10000');
      expect(await redis.ttl(key)).to.be.greaterThan(0);

      const over = await me(quotaServer, owner.token);
      expectError(over, 'QUOTA_EXCEEDED');
      expect(over.headers.get('retry-after')).to.equal(String(9 * 86_400 + 16 * 3600));
      expect(await redis.get(key)).to.equal('10000');

      // The database stays the billing record: every admitted call is written there, by whichever process served it.
      await Promise.all([quotaServer.deps.apiUsage.flush(), other.usage.flush()]);
      const [row] = await quotaServer.deps.db.orm.em
        .fork()
        .execute<{ total: string | number }[]>(
          'select sum("count") as total from api_calls_daily where organization_id = ?',
          [owner.organizationId],
        );
      expect(Number(row!.total)).to.equal(10_000);
    } finally {
      await other.close();
    }

    // A new month has a counter of its own.
    clock.set('2026-12-01T00:00:00.000Z');
    const december = signedIn(
      await quotaServer.caller().auth.login({ email: owner.email, password: owner.password }),
    );
    expect((await me(quotaServer, december.token)).status).to.equal(200);
    expect(await redis.get(`${prefix}quota:${owner.organizationId}:2026-12`)).to.equal('1');
  });

  it('does not count a request whose session was revoked', async () => {
    clock.set('2026-11-21T08:00:00.000Z');
    const owner = await createOrg(quotaServer.deps, { plan: 'starter' });
    const key = `${prefix}quota:${owner.organizationId}:2026-11`;
    expect((await me(quotaServer, owner.token)).status).to.equal(200);
    expect(await redis.get(key)).to.equal('1');
    const out = await http(quotaServer.baseUrl, 'POST', '/v1/auth/logout', { token: owner.token, body: {} });
    expect(out.status).to.equal(200);
    expect(await redis.get(key)).to.equal('2');
    expectError(await me(quotaServer, owner.token), 'UNAUTHORIZED');
    expect(await redis.get(key)).to.equal('2');
  });

  it('falls back to the process’s own limits when Redis cannot be reached: logged once, /readyz degraded', async () => {
    const { log, lines } = capturingLogger();
    const port = await freePort(); // nothing listens there
    const s = await startTestServer({
      log,
      env: { REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: prefix, RATE_LIMIT_BURST: '3' },
    });
    try {
      const ready = await http(s.baseUrl, 'GET', '/readyz');
      expect(ready.status).to.equal(200);
      expect(ready.body).to.deep.include({ success: true, status: 'degraded', redis: 'unreachable' });
      expect(ready.body.detail).to.match(/Redis is unreachable/);

      const owner = await createOrg(s.deps);
      for (let i = 0; i < 3; i++) expect((await me(s, owner.token)).status).to.equal(200);
      expectError(await me(s, owner.token), 'RATE_LIMITED');
      // Reconnection attempts go on (and fail) meanwhile: still one line.
      await new Promise((r) => setTimeout(r, 1_000));
      expect(lines.filter((l) => UNREACHABLE.test(l.msg))).to.have.length(1);
      expect(lines.every((l) => l.level === 40)).to.equal(true);
    } finally {
      await s.close();
    }
  });

  describe('when Redis goes away mid-run and comes back', function () {
    let own: PrivateRedis | undefined;
    let s: TestServer;
    let ownClient: Redis;
    let captured: ReturnType<typeof capturingLogger>;
    before(async function () {
      if (!redisServerAvailable) this.skip();
      own = await PrivateRedis.start();
      captured = capturingLogger();
      s = await startTestServer({
        clock,
        log: captured.log,
        env: { REDIS_URL: own.url, REDIS_KEY_PREFIX: prefix, RATE_LIMIT_BURST: '1000' },
      });
      ownClient = redisClient(own.url);
      ownClient.on('error', () => undefined);
    });
    after(async () => {
      ownClient?.disconnect();
      await s?.close();
      await own?.destroy();
    });

    const readyz = async () =>
      (await http(s.baseUrl, 'GET', '/readyz')).body as { status: string; redis: string };

    it('serves on with its own limits, then adds what it admitted meanwhile to the shared count', async () => {
      clock.set('2026-11-21T08:00:00.000Z');
      const owner = await createOrg(s.deps, { plan: 'starter' });
      const key = `${prefix}quota:${owner.organizationId}:2026-11`;
      for (let i = 0; i < 2; i++) expect((await me(s, owner.token)).status).to.equal(200);
      expect(await ownClient.get(key)).to.equal('2');
      expect((await readyz()).status).to.equal('ready');

      // Down (its data saved): requests are served with this process's own limits.
      await own!.stop('save');
      await waitFor(
        '/readyz to say degraded',
        async () => ((await readyz()).status === 'degraded' ? true : undefined),
        { timeoutMs: 20_000 },
      );
      for (let i = 0; i < 3; i++) expect((await me(s, owner.token)).status).to.equal(200);

      // Back: reconnected within the reconnection delay (2 s at most), and the 3 calls are added to the count.
      await own!.start();
      await waitFor(
        '/readyz to say ready',
        async () => ((await readyz()).redis === 'connected' ? true : undefined),
        { timeoutMs: 20_000 },
      );
      expect((await me(s, owner.token)).status).to.equal(200);
      expect(await ownClient.get(key)).to.equal('6');
      expect(captured.lines.filter((l) => UNREACHABLE.test(l.msg))).to.have.length(1);
      expect(captured.lines.filter((l) => BACK.test(l.msg))).to.have.length(1);

      // Down again, and back empty (no persistence): the counter is seeded again from the database and this
      // process's unflushed calls, so nothing is lost.
      await own!.stop('nosave');
      await waitFor(
        '/readyz to say degraded',
        async () => ((await readyz()).status === 'degraded' ? true : undefined),
        { timeoutMs: 20_000 },
      );
      expect((await me(s, owner.token)).status).to.equal(200);
      await own!.start();
      await ownClient.flushdb();
      await waitFor(
        '/readyz to say ready',
        async () => ((await readyz()).redis === 'connected' ? true : undefined),
        { timeoutMs: 20_000 },
      );
      expect((await me(s, owner.token)).status).to.equal(200);
      expect(await ownClient.get(key)).to.equal('8');
      expect(captured.lines.filter((l) => UNREACHABLE.test(l.msg))).to.have.length(2);
      expect(captured.lines.filter((l) => BACK.test(l.msg))).to.have.length(2);
    });

    it('answers within the command timeout while Redis hangs, and counts each call once', async () => {
      clock.set('2026-11-21T08:00:00.000Z');
      const owner = await createOrg(s.deps, { plan: 'starter' });
      const key = `${prefix}quota:${owner.organizationId}:2026-11`;
      expect((await me(s, owner.token)).status).to.equal(200);
      expect(await ownClient.get(key)).to.equal('1');
      await own!.pause(2_500);
      // Each request waits for the command timeout (1 s), then is served with this process's limits.
      for (let i = 0; i < 2; i++) expect((await me(s, owner.token)).status).to.equal(200);
      // Redis ran the delayed commands when the pause ended: they counted the calls, which are not added again.
      await waitFor(
        'the pause to end',
        async () => ((await readyz()).redis === 'connected' ? true : undefined),
        { timeoutMs: 20_000 },
      );
      expect((await me(s, owner.token)).status).to.equal(200);
      expect(await ownClient.get(key)).to.equal('4');
    });
  });
});
