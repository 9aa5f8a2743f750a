// What the audit log costs (`npm run bench -- audit`): POST /v1/vpn/connections (an audited change: the entry is
// written in the transaction of the create) on the server under test, against the same load on a second server on
// the same database with AUDIT_LOG_ENABLED=false. Target: with the audit log, at least 0.85 of the throughput.
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
  const audited = await creates(ctx, ctx.server.baseUrl);
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
