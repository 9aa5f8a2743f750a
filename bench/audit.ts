// What the audit log costs (`npm run bench -- audit`): POST /v1/vpn/connections (an audited change: the entry is
// written in the transaction of the create) on the server under test, against the same load on a second server on
// the same database with AUDIT_LOG_ENABLED=false. Target: with the audit log, at least 0.85 of the throughput.
import pg from 'pg';
import { measureLoad, type LoadResult } from './lib/load.js';
import type { BenchContext } from './lib/plugin.js';
import { fmt } from './lib/report.js';

const TARGET_RATIO = 0.85;
const PATH = '/v1/vpn/connections';
const BODY = { name: 'Bench audited', location: 'eu-west', protocol: 'openvpn' };

function creates(ctx: BenchContext, baseUrl: string): Promise<LoadResult> {
  return measureLoad({
    url: `${baseUrl}${PATH}`,
    method: 'POST',
    headers: { ...ctx.headers, 'content-type': 'application/json' },
    body: BODY,
    connections: ctx.settings.connections,
    durationSec: ctx.settings.durationSec,
    warmupSec: ctx.settings.warmupSec,
  });
}

export async function bench(ctx: BenchContext): Promise<void> {
  ctx.report.section('Audit log');
  const probe = await ctx.api('POST', PATH, BODY);
  if (probe.status !== 201) throw new Error(`creating a connection answered ${probe.status}`);

  const off = await ctx.startServer({ AUDIT_LOG_ENABLED: 'false' });
  let without: LoadResult;
  try {
    without = await creates(ctx, off.baseUrl);
  } finally {
    await off.stop();
  }
  let audited: LoadResult;
  try {
    audited = await creates(ctx, ctx.server.baseUrl);
  } finally {
    await removeCreated(ctx);
  }
  const ratio = audited.rps / without.rps;
  ctx.report.figure('POST /v1/vpn/connections, audit log off', without.rps, 'req/s');
  ctx.report.note(`audit log off: p50 ${fmt(without.p50)} ms, p99 ${fmt(without.p99)} ms`);
  ctx.report.figure('POST /v1/vpn/connections, audited', audited.rps, 'req/s');
  ctx.report.note(`audited: p50 ${fmt(audited.p50)} ms, p99 ${fmt(audited.p99)} ms`);
  ctx.report.figure('audited / audit log off', ratio, 'ratio', {
    target: `≥ ${TARGET_RATIO}`,
    met: ratio >= TARGET_RATIO,
  });
}

/**
 * Removes the connections the loads created (about two thousand) and their activations still queued, so that the
 * benches after this one find the organization and the job queue as they were (the VPN bench seeds exactly 1,000
 * connections and waits for an activation; the billing bench moves the organization to a smaller plan).
 */
async function removeCreated(ctx: BenchContext): Promise<void> {
  const client = new pg.Client({ connectionString: ctx.databaseUrl });
  await client.connect();
  try {
    await client.query(
      `delete from pgboss.job where name = 'vpn.activate' and state in ('created', 'retry')
          and data->>'connection_id' in (select id from vpn_connections where name = $1)`,
      [BODY.name],
    );
    await client.query('delete from vpn_connections where name = $1', [BODY.name]);
  } finally {
    await client.end();
  }
}
