// Lists that stay flat as data grows, for `npm run bench` (alone: `npm run bench -- scale-lists`), on PostgreSQL
// (docs/api-conventions.md, "Lists"). Two organizations of their own: one with 1,000 VPN connections and one with 1,000,000, written
// by SQL (`insert … select` over generate_series, as an operator's bulk import would: the triggers of migration 30
// keep the list counts exact on the way, checked below). Figures:
// - page 1 (`limit=20`, 10 connections of load) in each, p50 and req/s: the 1 M one within 3 × the 1 k one's p50;
// - the slowest page 1 over every combination of the list's filters in the 1 M organization (each a range of an
//   index: no filter reads the organization's rows);
// - `?page=40000&limit=20` (an offset costs its depth) against `starting_after` at the same depth (the same cost as
//   page 1).
// The organizations' rows are deleted afterwards.
import pg from 'pg';
import type { BenchContext } from './lib/plugin.js';
import { describeFailures, type LoadResult } from './lib/load.js';
import { fmt } from './lib/report.js';

const SMALL = 1_000;
const LARGE = 1_000_000;
const CONNECTIONS = 10;
const PAGE1 = '/v1/vpn/connections?limit=20';
const DEEP_PAGE = 40_000;

interface Registered {
  token: string;
  user: { id: string; organization_id: string };
}

async function organization(ctx: BenchContext, label: string, db: pg.Client): Promise<Registered> {
  const reg = await ctx.api<Registered>('POST', '/v1/auth/register', {
    email: `bench-scale-${label}-${Date.now()}@example.test`,
    password: 'bench-scale-password',
    name: `Bench Scale ${label}`,
    organization_name: `Bench Scale ${label}`,
  });
  if (reg.status !== 201) throw new Error(`registering answered ${reg.status}`);
  await db.query(`update organizations set plan = 'enterprise' where id = $1`, [
    reg.body.user.organization_id,
  ]);
  return reg.body;
}

/**
 * `n` connections of the organization's owner, newest first one second apart, spread over the filters' values
 * (status `error` rare, so that a filter on it finds few rows), in statements of 250,000 rows.
 */
async function seed(db: pg.Client, org: Registered, n: number): Promise<void> {
  const { rows } = await db.query<{ id: string }>(`select id from vpn_servers order by id limit 1`);
  const chunk = 250_000;
  for (let from = 1; from <= n; from += chunk) {
    await db.query(
      `insert into vpn_connections (id, created_at, updated_at, organization_id, user_id, server_id, name,
                                    location, protocol, status)
       select 'vpn_scale' || $5 || '_' || g, now() - g * interval '1 second', now(), $1, $2, $3, 'Scale ' || g,
              (array['us-east','us-west','ca-central','sa-east','eu-west','eu-central','ap-southeast','ap-northeast'])[1 + g % 8],
              case when g % 3 = 0 then 'openvpn' else 'wireguard' end,
              case when g % 1000 = 7 then 'error' when g % 3 = 1 then 'active' when g % 3 = 2 then 'inactive' else 'connecting' end
         from generate_series($4::int, $6::int) g`,
      [
        org.user.organization_id,
        org.user.id,
        rows[0]!.id,
        from,
        org.user.id.slice(4),
        Math.min(n, from + chunk - 1),
      ],
    );
  }
}

/** p50 of `times` requests one after the other (after one unmeasured). */
async function sequentialP50(ctx: BenchContext, path: string, token: string, times = 15): Promise<number> {
  await ctx.api('GET', path, undefined, token);
  const ms: number[] = [];
  for (let i = 0; i < times; i++) {
    const t = performance.now();
    const res = await ctx.api('GET', path, undefined, token);
    ms.push(performance.now() - t);
    if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}`);
  }
  ms.sort((a, b) => a - b);
  return ms[Math.floor(ms.length / 2)]!;
}

function failures(ctx: BenchContext, label: string, r: LoadResult): void {
  const f = describeFailures(r);
  if (f) ctx.report.note(`${label}: only 2xx responses count: ${f}`);
}

export async function bench(ctx: BenchContext): Promise<void> {
  ctx.report.section('Lists at scale: 1,000 vs 1,000,000 VPN connections, PostgreSQL');
  const db = new pg.Client({ connectionString: ctx.databaseUrl });
  await db.connect();
  const orgs: string[] = [];
  try {
    const small = await organization(ctx, 'small', db);
    const large = await organization(ctx, 'large', db);
    orgs.push(small.user.organization_id, large.user.organization_id);
    const t0 = performance.now();
    await seed(db, small, SMALL);
    await seed(db, large, LARGE);
    await db.query('analyze vpn_connections');
    ctx.report.figure(
      'seeding 1,001,000 connections by SQL (triggers on)',
      (performance.now() - t0) / 1000,
      's',
      {
        target: '< 60 s',
        met: performance.now() - t0 < 60_000,
      },
    );
    const total = (
      await ctx.api<{ total: number }>('GET', '/v1/vpn/connections?limit=1', undefined, large.token)
    ).body.total;
    ctx.report.figure('  total of the 1 M list (from the maintained counts)', total, '', {
      target: `= ${fmt(LARGE)}`,
      met: total === LARGE,
    });

    const as = (token: string) => ({ authorization: `Bearer ${token}` });
    // The 1 k reference is measured before and after the 1 M load and averaged, so that drift of a shared machine
    // weighs on both sides alike.
    const s1 = await ctx.load({ path: PAGE1, headers: as(small.token), connections: CONNECTIONS });
    const l = await ctx.load({ path: PAGE1, headers: as(large.token), connections: CONNECTIONS });
    const s2 = await ctx.load({ path: PAGE1, headers: as(small.token), connections: CONNECTIONS });
    failures(ctx, '1 k page 1', s1);
    failures(ctx, '1 M page 1', l);
    failures(ctx, '1 k page 1 (after)', s2);
    const smallP50 = (s1.p50 + s2.p50) / 2;
    ctx.report.figure(`GET ${PAGE1}, 1 k connections: p50 (mean of 2)`, smallP50, 'ms');
    ctx.report.figure('  req/s', (s1.rps + s2.rps) / 2, 'req/s');
    ctx.report.figure(`GET ${PAGE1}, 1 M connections: p50`, l.p50, 'ms', {
      target: `≤ ${fmt(3 * smallP50)} ms (3 × the 1 k p50)`,
      met: l.p50 <= 3 * smallP50,
    });
    ctx.report.figure('  req/s', l.rps, 'req/s');

    // Every combination of the filters (the owner's own list, everyone's with user_id=all), page 1.
    let slowest = { p50: 0, query: '' };
    for (const user of ['', 'user_id=all']) {
      for (const status of ['', 'status=error', 'status=active']) {
        for (const protocol of ['', 'protocol=openvpn']) {
          for (const location of ['', 'location=ap-northeast']) {
            const query = [user, status, protocol, location, 'limit=20'].filter(Boolean).join('&');
            const p50 = await sequentialP50(ctx, `/v1/vpn/connections?${query}`, large.token, 7);
            if (p50 > slowest.p50) slowest = { p50, query };
          }
        }
      }
    }
    const baseline = await sequentialP50(ctx, PAGE1, large.token);
    ctx.report.figure(
      `  slowest filter combination, page 1, one request at a time (?${slowest.query})`,
      slowest.p50,
      'ms',
      {
        target: `≤ ${fmt(3 * baseline)} ms (3 × unfiltered, ${fmt(baseline)} ms)`,
        met: slowest.p50 <= 3 * baseline,
      },
    );

    const deep = `/v1/vpn/connections?page=${DEEP_PAGE}&limit=20`;
    const { rows } = await db.query<{ id: string }>(
      `select id from vpn_connections where organization_id = $1 order by created_at desc, id desc offset $2 limit 1`,
      [large.user.organization_id, (DEEP_PAGE - 1) * 20 - 1],
    );
    const cursor = `/v1/vpn/connections?limit=20&starting_after=${rows[0]!.id}`;
    const byPage = await sequentialP50(ctx, deep, large.token, 7);
    const byCursor = await sequentialP50(ctx, cursor, large.token);
    const first = await sequentialP50(ctx, PAGE1, large.token);
    const same =
      JSON.stringify(
        (await ctx.api<{ connections: unknown[] }>('GET', deep, undefined, large.token)).body.connections,
      ) ===
      JSON.stringify(
        (await ctx.api<{ connections: unknown[] }>('GET', cursor, undefined, large.token)).body.connections,
      );
    ctx.report.figure(`GET ?page=${DEEP_PAGE}&limit=20 (1 M), one request at a time: p50`, byPage, 'ms', {
      target: 'costs its offset (use starting_after)',
    });
    ctx.report.figure(
      `GET ?limit=20&starting_after=<item ${fmt((DEEP_PAGE - 1) * 20)}> (the same items): p50`,
      byCursor,
      'ms',
      {
        target: `≤ ${fmt(3 * first)} ms (3 × page 1, ${fmt(first)} ms): the same cost on any page`,
        met: byCursor <= 3 * first && same,
      },
    );
    if (!same) ctx.report.note(`starting_after deep in the list did not return page ${DEEP_PAGE}'s items`);
  } finally {
    if (orgs.length) {
      const t = performance.now();
      await db.query('delete from vpn_connections where organization_id = any($1)', [orgs]);
      const [row] = (
        await db.query<{ n: string }>(
          `select coalesce(sum(n), 0) as n from list_counts where list = 'vpn_connections' and scope_id = any($1)`,
          [orgs],
        )
      ).rows;
      ctx.report.note(
        `scale-lists: removed the seeded connections in ${fmt((performance.now() - t) / 1000)} s; counts left: ${row?.n}`,
      );
    }
    await db.end();
  }
}
