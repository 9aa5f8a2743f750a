// API key and idempotency figures for `npm run bench` (alone: `npm run bench -- api-keys`), on PostgreSQL, in an
// organization of its own (so the other benches' data stays as they expect it):
// - GET /v1/vpn/connections authenticated by an API key against the same with an access token, in the same run
//   (target: at least 0.9 of the token's throughput; the key is resolved on the same one-query hot path);
// - POST /v1/billing/payment-methods with an `Idempotency-Key` (a new key on every request, so each one runs and
//   keeps its answer) against the same POST without (target: at least 0.7). A create that queues no background work:
//   thousands of VPN connections would each queue an activation job on the queue the other benches share.
// Each reference load runs before and after the measured one and their mean is the reference, so that the growth
// of the table during the POST loads (and any drift of a shared machine) weighs on both sides alike.
import { ownEnterpriseOrganization } from './lib/organization.js';
import type { BenchContext } from './lib/plugin.js';
import type { LoadResult } from './lib/load.js';
import { describeFailures } from './lib/load.js';
import { fmt } from './lib/report.js';

const LIST = '/v1/vpn/connections?page=1&limit=20';
const CREATE = { name: 'Bench device', location: 'eu-central', protocol: 'wireguard' };
const CARD = { payment_method: 'pm_card_visa' };
const GET_TARGET = 0.9;
const POST_TARGET = 0.7;

async function ownOrganization(ctx: BenchContext): Promise<{ token: string; secret: string }> {
  // Unlimited connections and quota, as the bench's own organization has.
  const { token } = await ownEnterpriseOrganization(ctx, 'keys');
  const key = await ctx.api<{ secret: string }>(
    'POST',
    '/v1/api-keys',
    { name: 'bench', permissions: ['vpn:read', 'vpn:write', 'billing:write'] },
    token,
  );
  if (key.status !== 201) throw new Error(`creating the API key answered ${key.status}`);
  for (let i = 0; i < 20; i++) {
    const made = await ctx.api('POST', '/v1/vpn/connections', { ...CREATE, name: `Device ${i}` }, token);
    if (made.status !== 201) throw new Error(`creating a connection answered ${made.status}`);
  }
  return { token, secret: key.body.secret };
}

function note(ctx: BenchContext, label: string, r: LoadResult): void {
  const failures = describeFailures(r);
  if (failures) ctx.report.note(`${label}: only 2xx responses count: ${failures}`);
}

export async function bench(ctx: BenchContext): Promise<void> {
  ctx.report.section('API keys and idempotency, PostgreSQL');
  const { token, secret } = await ownOrganization(ctx);
  const as = (bearer: string) => ({ authorization: `Bearer ${bearer}` });

  const tokenBefore = await ctx.load({ path: LIST, headers: as(token) });
  const withKey = await ctx.load({ path: LIST, headers: as(secret) });
  const tokenAfter = await ctx.load({ path: LIST, headers: as(token) });
  const tokenRps = (tokenBefore.rps + tokenAfter.rps) / 2;
  note(ctx, 'GET with a token', tokenBefore);
  note(ctx, 'GET with an API key', withKey);
  ctx.report.figure(`GET ${LIST} with an access token (mean of 2)`, tokenRps, 'req/s');
  ctx.report.figure(`GET ${LIST} with an API key`, withKey.rps, 'req/s', {
    target: `≥ ${fmt(GET_TARGET * tokenRps)} req/s (${GET_TARGET} × token)`,
    met: withKey.rps >= GET_TARGET * tokenRps,
  });
  ctx.report.figure('  key / token', withKey.rps / tokenRps, '×', {
    target: `≥ ${GET_TARGET}`,
    met: withKey.rps >= GET_TARGET * tokenRps,
  });
  ctx.report.figure('  p99 with the key', withKey.p99, 'ms');

  const post = (idempotent: boolean) =>
    ctx.load({
      path: '/v1/billing/payment-methods',
      method: 'POST',
      body: CARD,
      headers: as(secret),
      ...(idempotent ? { uniqueHeader: 'idempotency-key' } : {}),
    });
  const plainBefore = await post(false);
  const idempotent = await post(true);
  const plainAfter = await post(false);
  const plainRps = (plainBefore.rps + plainAfter.rps) / 2;
  note(ctx, 'POST without a key', plainBefore);
  note(ctx, 'POST with Idempotency-Key', idempotent);
  ctx.report.figure(
    'POST /v1/billing/payment-methods without Idempotency-Key (mean of 2)',
    plainRps,
    'req/s',
  );
  ctx.report.figure('POST /v1/billing/payment-methods with Idempotency-Key', idempotent.rps, 'req/s', {
    target: `≥ ${fmt(POST_TARGET * plainRps)} req/s (${POST_TARGET} × without)`,
    met: idempotent.rps >= POST_TARGET * plainRps,
  });
  ctx.report.figure('  with / without', idempotent.rps / plainRps, '×', {
    target: `≥ ${POST_TARGET}`,
    met: idempotent.rps >= POST_TARGET * plainRps,
  });
  ctx.report.figure('  p99 with the key', idempotent.p99, 'ms');
}
