// Hosting figures for `npm run bench` (alone: `npm run bench -- hosting`):
//   - GET /v1/hosting/sites, one page of 20 out of 1,000 sites of an organization on the enterprise plan, against a
//     hand-written Fastify + `pg` route doing the same queries (bench/lib/hosting-baseline-server.ts), both on the
//     same PostgreSQL database in the same run. Target: at least half the baseline's throughput.
//   - 200 concurrent Server-Sent Events followers of one build's log: the delay from a line's timestamp (taken by
//     the build step that writes it) to its arrival at each follower (target p99 < 100 ms), and the server's extra
//     resident memory while they follow (target < 50 MB).
import nodeHttp from 'node:http';
import pg from 'pg';
import type { BenchContext } from './lib/plugin.js';
import { listAgainstBaseline } from './lib/list-baseline.js';
import { fmt } from './lib/report.js';
import { percentile } from './lib/stats.js';

const SITES = 1000;
const TARGET_RATIO = 0.5;
const PATH = '/v1/hosting/sites?page=1&limit=20';
const FOLLOWERS = Number(process.env.BENCH_HOSTING_FOLLOWERS ?? 200);
const BUILDS = Number(process.env.BENCH_HOSTING_BUILDS ?? 3);
const TARGET_P99_MS = 100;
const TARGET_EXTRA_RSS_MB = 50;

interface Site {
  id: string;
  url: string;
}
interface Deployment {
  id: string;
  status: string;
}

async function waitForBuild(ctx: BenchContext, siteId: string, id: string): Promise<Deployment> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const res = await ctx.api<{ deployment: Deployment }>(
      'GET',
      `/v1/hosting/sites/${siteId}/deployments/${id}`,
    );
    const d = res.body.deployment;
    if (d && ['success', 'failed', 'canceled'].includes(d.status)) return d;
    if (Date.now() > deadline) throw new Error(`deployment ${id} did not finish`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * 1,000 sites of the owner: one through the API and deployed (so the row is the real one, live and preview
 * included), the rest copied from it in one statement, spread over the past month.
 */
async function seed(ctx: BenchContext): Promise<void> {
  const created = await ctx.api<{ site: Site }>('POST', '/v1/hosting/sites', {
    name: 'Bench site',
    git_repo: 'https://github.com/acme/bench',
    framework: 'nextjs',
    environment_variables: { API_URL: 'https://api.example.com' },
  });
  if (created.status !== 201) throw new Error(`creating a site answered ${created.status}`);
  const id = created.body.site.id;
  const deployed = await ctx.api<{ deployment: Deployment }>('POST', `/v1/hosting/sites/${id}/deploy`, {});
  if (deployed.status !== 202) throw new Error(`deploying answered ${deployed.status}`);
  await waitForBuild(ctx, id, deployed.body.deployment.id);
  const client = new pg.Client({ connectionString: ctx.databaseUrl });
  await client.connect();
  try {
    await client.query(
      `insert into hosting_sites (id, created_at, updated_at, organization_id, user_id, name, slug, domain, git_repo,
          branch, framework, build_command, output_directory, node_version, environment_variables, status,
          ssl_enabled, live_deployment_id, live_deployment_at, preview_deployment_id, live_since, build_ticket)
       select 'site_bench' || lpad(i::text, 15, '0'),
              now() - (i || ' minutes')::interval * 43, now() - (i || ' minutes')::interval * 43,
              s.organization_id, s.user_id, 'Bench site ' || i, 'bench-site-' || i,
              case when i % 4 = 0 then 'bench-' || i || '.example.org' end, s.git_repo, s.branch, s.framework,
              s.build_command, s.output_directory, s.node_version, s.environment_variables, s.status, s.ssl_enabled,
              case when i % 2 = 0 then s.live_deployment_id end, case when i % 2 = 0 then s.live_deployment_at end,
              case when i % 2 = 0 then s.preview_deployment_id end, case when i % 2 = 0 then s.live_since end, 0
         from generate_series(1, $2::int) as i, hosting_sites s
        where s.id = $1`,
      [id, SITES - 1],
    );
  } finally {
    await client.end();
  }
  const check = await ctx.api<{ sites: Site[]; total: number }>('GET', PATH);
  if (check.status !== 200 || check.body.total !== SITES || check.body.sites.length !== 20) {
    throw new Error(`the list answered ${check.status} with total ${check.body.total}`);
  }
}

async function listFigures(ctx: BenchContext): Promise<void> {
  ctx.report.section(`Hosting: GET /v1/hosting/sites (page of 20 of ${fmt(SITES)}), PostgreSQL`);
  await seed(ctx);
  await listAgainstBaseline(ctx, {
    name: 'hosting list baseline',
    script: 'bench/lib/hosting-baseline-server.ts',
    path: PATH,
    total: SITES,
    sameItems: 'sites',
    targetRatio: TARGET_RATIO,
  });
}

interface Follower {
  /** Delays of the lines written while it was connected (not the backlog it was sent on connecting). */
  delays: number[];
  lines: number;
  /** Lines that were already stored when it connected. */
  backlog: number;
  ended: boolean;
  done: Promise<void>;
  close(): void;
}

/** One raw SSE client; records, for every line, now − the line's timestamp. */
function follow(ctx: BenchContext, path: string): Promise<Follower> {
  const url = new URL(path, ctx.server.baseUrl);
  return new Promise((resolve, reject) => {
    const req = nodeHttp.request(url, {
      agent: false,
      headers: { ...ctx.headers, accept: 'text/event-stream' },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`a follower got ${res.statusCode}`));
        return;
      }
      const connectedAt = Date.now();
      const f: Follower = {
        delays: [],
        lines: 0,
        backlog: 0,
        ended: false,
        done: undefined!,
        close: () => req.destroy(),
      };
      f.done = new Promise((ok) => res.on('close', ok));
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const now = Date.now();
        buffer += chunk;
        let i: number;
        while ((i = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (/^event: log$/m.test(block) && data) {
            f.lines++;
            const written = Date.parse((JSON.parse(data) as { timestamp: string }).timestamp);
            if (written >= connectedAt) f.delays.push(now - written);
            else f.backlog++;
          } else if (/^event: end$/m.test(block)) f.ended = true;
        }
      });
      resolve(f);
    });
    req.end();
  });
}

async function followerFigures(ctx: BenchContext): Promise<void> {
  ctx.report.section(`Hosting: ${FOLLOWERS} Server-Sent Events followers of one build, ${BUILDS} builds`);
  const created = await ctx.api<{ site: Site }>('POST', '/v1/hosting/sites', {
    name: 'Followed site',
    git_repo: 'https://github.com/acme/followed',
    framework: 'react',
  });
  if (created.status !== 201) throw new Error(`creating a site answered ${created.status}`);
  const siteId = created.body.site.id;
  const rssBefore = ctx.server.rssMb() ?? NaN;
  let rssPeak = rssBefore;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, ctx.server.rssMb() ?? 0);
  }, 50);
  const delays: number[] = [];
  let complete = 0;
  let lines = 0;
  let backlog = 0;
  try {
    for (let b = 0; b < BUILDS; b++) {
      const deployed = await ctx.api<{ deployment: Deployment }>(
        'POST',
        `/v1/hosting/sites/${siteId}/deploy`,
        {},
      );
      if (deployed.status !== 202) throw new Error(`deploying answered ${deployed.status}`);
      const id = deployed.body.deployment.id;
      const path = `/v1/hosting/sites/${siteId}/deployments/${id}/logs`;
      // Connected while the deployment is queued, so they see every line as it is written.
      const followers: Follower[] = [];
      for (let i = 0; i < FOLLOWERS; i += 50) {
        followers.push(
          ...(await Promise.all(
            Array.from({ length: Math.min(50, FOLLOWERS - i) }, () => follow(ctx, path)),
          )),
        );
      }
      await Promise.race([
        Promise.all(followers.map((f) => f.done)),
        new Promise((r) => setTimeout(r, 60_000)),
      ]);
      for (const f of followers) {
        delays.push(...f.delays);
        lines += f.lines;
        backlog += f.backlog;
        if (f.ended) complete++;
        f.close();
      }
    }
  } finally {
    clearInterval(sampler);
  }
  delays.sort((a, b) => a - b);
  ctx.report.figure('lines delivered (all followers, all builds)', lines, 'lines');
  ctx.report.figure('  of which stored before their follower connected (not timed)', backlog, 'lines');
  ctx.report.figure('followers that got every line and `end`', complete, `of ${FOLLOWERS * BUILDS}`);
  ctx.report.figure('delivery delay p50', percentile(delays, 50), 'ms');
  ctx.report.figure('delivery delay p99', percentile(delays, 99), 'ms', {
    target: `< ${TARGET_P99_MS} ms`,
    met: percentile(delays, 99) < TARGET_P99_MS,
  });
  ctx.report.figure('delivery delay max', delays.at(-1) ?? NaN, 'ms');
  const extra = rssPeak - rssBefore;
  ctx.report.figure('server RSS before the followers', rssBefore, 'MB');
  ctx.report.figure('  extra RSS while they followed (peak)', extra, 'MB', {
    target: `< ${TARGET_EXTRA_RSS_MB} MB`,
    met: extra < TARGET_EXTRA_RSS_MB,
  });
}

export async function bench(ctx: BenchContext): Promise<void> {
  await listFigures(ctx);
  await followerFigures(ctx);
}
