// The burst limit across several processes (`npm run bench -- scale-limits`): 1, 2 and 3 extra server processes on
// the bench database with RATE_LIMIT_BURST=20, first each on its own (no REDIS_URL: every process keeps its own
// window), then sharing one Redis (REDIS_URL: one window for all). For each count, one fresh login sends 100 requests
// at once, spread round-robin over the processes, from outside over HTTP; the figure is how many were let through.
// Goal (docs/api-conventions.md, "Rate limits and quotas"): 20 with any number of processes when REDIS_URL is set.
//
// Redis: BENCH_REDIS_URL, else redis://127.0.0.1:6379, under a key prefix of this run's own (removed at the end).
import { randomBytes } from 'node:crypto';
import type { BenchContext } from './lib/plugin.js';
import type { ServerHandle } from './lib/processes.js';
import { deleteRedisKeys, redisReachable } from './lib/redis.js';

const LIMIT = 20;
const REQUESTS = 100;
const PROCESS_COUNTS = [1, 2, 3];

/** How many of REQUESTS sent at once with one fresh login, spread over `servers`, were answered 200. */
async function passed(
  ctx: BenchContext,
  servers: ServerHandle[],
  email: string,
  password: string,
): Promise<number> {
  const login = await fetch(`${servers[0]!.baseUrl}/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-proto': 'https' },
    body: JSON.stringify({ email, password }),
  });
  if (login.status !== 200) throw new Error(`login answered ${login.status}`);
  const { token } = (await login.json()) as { token: string };
  const statuses = await Promise.all(
    Array.from({ length: REQUESTS }, async (_, i) => {
      const res = await fetch(`${servers[i % servers.length]!.baseUrl}/v1/auth/me`, {
        headers: { ...ctx.headers, authorization: `Bearer ${token}` },
      });
      await res.arrayBuffer();
      return res.status;
    }),
  );
  const other = statuses.filter((s) => s !== 200 && s !== 429);
  if (other.length > 0) throw new Error(`unexpected statuses: ${[...new Set(other)].join(', ')}`);
  return statuses.filter((s) => s === 200).length;
}

/** Starts `count` servers with `env`, measures with each prefix of them (1, 2, 3 processes), stops them. */
async function measure(
  ctx: BenchContext,
  env: Record<string, string>,
  owner: { email: string; password: string },
): Promise<number[]> {
  const servers: ServerHandle[] = [];
  try {
    const max = Math.max(...PROCESS_COUNTS);
    servers.push(await ctx.startServer(env));
    servers.push(...(await Promise.all(Array.from({ length: max - 1 }, () => ctx.startServer(env)))));
    const results: number[] = [];
    for (const n of PROCESS_COUNTS)
      results.push(await passed(ctx, servers.slice(0, n), owner.email, owner.password));
    return results;
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
}

export async function bench(ctx: BenchContext): Promise<void> {
  ctx.report.section(
    `Burst limit across processes (RATE_LIMIT_BURST=${LIMIT}, ${REQUESTS} requests at once)`,
  );
  const owner = { email: `bench-scale-${Date.now()}@example.test`, password: 'bench-password-123' };
  const reg = await ctx.api('POST', '/v1/auth/register', {
    ...owner,
    name: 'Bench scale',
    organization_name: 'Bench scale',
  });
  if (reg.status !== 201) throw new Error(`register answered ${reg.status}`);

  const env = { RATE_LIMIT_BURST: String(LIMIT) };
  const label = `burst limit with ${PROCESS_COUNTS.join(' / ')} processes (limit ${LIMIT} per 10 s)`;
  // REDIS_URL empty: unset, also when BENCH_REDIS_URL gives the bench's main server one.
  const own = await measure(ctx, { ...env, REDIS_URL: '' }, owner);
  ctx.report.figure(`${label}, no REDIS_URL: ${own.join(' / ')}`, Math.max(...own), 'pass at most', {
    target: `each process its own window: ${PROCESS_COUNTS.map((n) => n * LIMIT).join(' / ')} expected`,
  });

  const redisUrl = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379';
  const shown = redisUrl.replace(/\/\/[^@]*@/, '//');
  if (!(await redisReachable(redisUrl))) {
    ctx.report.note(
      `Redis at ${shown} does not answer: the shared figure is not measured (set BENCH_REDIS_URL)`,
    );
    return;
  }
  const prefix = `bench:scale:${randomBytes(4).toString('hex')}:`;
  try {
    const shared = await measure(ctx, { ...env, REDIS_URL: redisUrl, REDIS_KEY_PREFIX: prefix }, owner);
    ctx.report.figure(`${label}, REDIS_URL: ${shared.join(' / ')}`, Math.max(...shared), 'pass at most', {
      target: `${LIMIT} with any number of processes when REDIS_URL is set`,
      met: shared.every((n) => n === LIMIT),
    });
  } finally {
    await deleteRedisKeys(redisUrl, prefix);
  }
}
