// VPN figures for `npm run bench` (alone: `npm run bench -- vpn`): GET /v1/vpn/connections, one page of 20 out of
// 1,000 connections of an organization on the enterprise plan, against a hand-written Fastify + `pg` route doing
// the same queries (bench/lib/vpn-baseline-server.ts), both on the same PostgreSQL database in the same run.
// Target: at least half the baseline's throughput.
import pg from 'pg';
import type { BenchContext } from './lib/plugin.js';
import { listAgainstBaseline } from './lib/list-baseline.js';
import { fmt } from './lib/report.js';

const CONNECTIONS = 1000;
const TARGET_RATIO = 0.5;
const PATH = '/v1/vpn/connections?page=1&limit=20';

interface Me {
  user: { id: string; organization_id: string };
}
interface Created {
  connection: { id: string; server_id: string; status: string };
}
interface Listed {
  connections: { id: string }[];
  total: number;
}

/**
 * 1,000 connections of the owner: one through the API (so the path is the real one, activation included), the rest
 * copied from it in one statement, spread over the past month, a third of them active with their own traffic.
 */
async function seed(ctx: BenchContext): Promise<void> {
  const me = await ctx.api<Me>('GET', '/v1/auth/me');
  if (me.status !== 200) throw new Error(`/v1/auth/me answered ${me.status}`);
  const created = await ctx.api<Created>('POST', '/v1/vpn/connections', {
    name: 'Bench laptop',
    location: 'eu-central',
    protocol: 'wireguard',
  });
  if (created.status !== 201) throw new Error(`creating a connection answered ${created.status}`);
  const id = created.body.connection.id;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await ctx.api<Created>('GET', `/v1/vpn/connections/${id}`);
    if (res.body.connection?.status === 'active') break;
    if (Date.now() > deadline) throw new Error('the created connection did not become active');
    await new Promise((r) => setTimeout(r, 200));
  }
  const client = new pg.Client({ connectionString: ctx.databaseUrl });
  await client.connect();
  try {
    await client.query(
      `insert into vpn_connections (id, created_at, updated_at, organization_id, user_id, server_id, name, location,
          protocol, status, auto_connect, connect_generation, client_public_key, client_address, connected_at,
          last_activity, upload_bytes, download_bytes, session_upload_base, session_download_base, upload_rate,
          download_rate)
       select 'vpn_bench' || lpad(i::text, 15, '0'),
              now() - (i || ' minutes')::interval * 43, now() - (i || ' minutes')::interval * 43,
              c.organization_id, c.user_id, c.server_id, 'Bench device ' || i, c.location, c.protocol,
              case when i % 3 = 0 then 'active' else 'inactive' end, i % 2 = 0, 1, c.client_public_key,
              c.client_address,
              case when i % 3 = 0 then now() - (i || ' seconds')::interval end,
              now() - (i || ' seconds')::interval, i * 1000, i * 7000, i * 1000, i * 7000, 4096, 20480
         from generate_series(1, $2::int) as i, vpn_connections c
        where c.id = $1`,
      [id, CONNECTIONS - 1],
    );
  } finally {
    await client.end();
  }
  const check = await ctx.api<Listed>('GET', PATH);
  if (check.status !== 200 || check.body.total !== CONNECTIONS || check.body.connections.length !== 20) {
    throw new Error(`the list answered ${check.status} with total ${check.body.total}`);
  }
}

export async function bench(ctx: BenchContext): Promise<void> {
  ctx.report.section(`VPN: GET /v1/vpn/connections (page of 20 of ${fmt(CONNECTIONS)}), PostgreSQL`);
  await seed(ctx);

  await listAgainstBaseline(ctx, {
    name: 'VPN list baseline',
    script: 'bench/lib/vpn-baseline-server.ts',
    path: PATH,
    total: CONNECTIONS,
    targetRatio: TARGET_RATIO,
  });
}
