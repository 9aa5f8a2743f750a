// Databases figures for `npm run bench` (alone: `npm run bench -- databases`): GET /v1/databases, one page of 20
// out of 1,000 databases of an organization on the enterprise plan, against a hand-written Fastify + `pg` route
// doing the same queries and the same JSON (bench/lib/databases-baseline-server.ts), both on the same PostgreSQL
// database in the same run. Target: at least half the baseline's throughput.
import pg from 'pg';
import type { BenchContext } from './lib/plugin.js';
import { listAgainstBaseline } from './lib/list-baseline.js';
import { fmt } from './lib/report.js';

const DATABASES = 1000;
const TARGET_RATIO = 0.5;
const PATH = '/v1/databases?page=1&limit=20';

interface Created {
  database: { id: string; status: string };
}
interface Listed {
  databases: { id: string }[];
  total: number;
}

/**
 * 1,000 databases of the owner: one through the API (so the path is the real one, provisioning included), the
 * rest copied from it in one statement, spread over the past month, across engines, sizes and regions, most of
 * them running.
 */
async function seed(ctx: BenchContext): Promise<void> {
  const created = await ctx.api<Created>('POST', '/v1/databases', { name: 'bench', engine: 'postgresql' });
  if (created.status !== 201) throw new Error(`creating a database answered ${created.status}`);
  const id = created.body.database.id;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await ctx.api<Created>('GET', `/v1/databases/${id}`);
    if (res.body.database?.status === 'running') break;
    if (Date.now() > deadline) throw new Error('the created database did not become running');
    await new Promise((r) => setTimeout(r, 200));
  }
  const client = new pg.Client({ connectionString: ctx.databaseUrl });
  await client.connect();
  try {
    await client.query(
      `insert into databases (id, created_at, updated_at, organization_id, user_id, name, engine, version, size,
          region, status, backup_enabled, multi_az, backup_retention, host, db_name, db_user, password_hash,
          generation, backup_schedule, next_backup_at, last_backup_at)
       select 'db_bench' || lpad(i::text, 15, '0'),
              now() - (i || ' minutes')::interval * 43, now() - (i || ' minutes')::interval * 43,
              d.organization_id, d.user_id, 'bench-' || i,
              (array['postgresql', 'mysql', 'mongodb'])[1 + i % 3],
              (array['16', '8.4', '7.0'])[1 + i % 3],
              (array['small', 'medium', 'large', 'xl'])[1 + i % 4],
              (array['us-east', 'eu-west', 'ap-southeast'])[1 + i % 3],
              case when i % 10 = 0 then 'resizing' else 'running' end,
              i % 5 <> 0, i % 7 = 0, 7, 'bench-' || i || '-x1y2z3w4.us-east.db.example.com', d.db_name, d.db_user,
              d.password_hash, 1, 1, now() + interval '1 day', now() - interval '1 hour'
         from generate_series(1, $2::int) as i, databases d
        where d.id = $1`,
      [id, DATABASES - 1],
    );
  } finally {
    await client.end();
  }
  const check = await ctx.api<Listed>('GET', PATH);
  if (check.status !== 200 || check.body.total !== DATABASES || check.body.databases.length !== 20) {
    throw new Error(`the list answered ${check.status} with total ${check.body.total}`);
  }
}

export async function bench(ctx: BenchContext): Promise<void> {
  ctx.report.section(`Databases: GET /v1/databases (page of 20 of ${fmt(DATABASES)}), PostgreSQL`);
  await seed(ctx);

  await listAgainstBaseline(ctx, {
    name: 'databases list baseline',
    script: 'bench/lib/databases-baseline-server.ts',
    path: PATH,
    total: DATABASES,
    targetRatio: TARGET_RATIO,
  });
}
