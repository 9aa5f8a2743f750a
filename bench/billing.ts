// Billing figures for `npm run bench` (alone: `npm run bench -- billing`), on PostgreSQL:
// - renewals: 10,000 organizations whose billing period ends at the same instant, each with a card on file; the
//   server's billing scheduler and job queue renew them. Target: every one invoiced (and charged) within 60 s of
//   the period end, none twice.
// - the p50 time to render one invoice PDF through its signed `pdf_url`.
import pg from 'pg';
import { ownEnterpriseOrganization } from './lib/organization.js';
import type { BenchContext } from './lib/plugin.js';
import { fmt } from './lib/report.js';

const ORGS = 10_000;
const TARGET_SECONDS = 60;
const PDF_SAMPLES = 200;
/** The period end is set this far ahead of the seeding, so the server sees it coming as it would in production. */
const LEAD_MS = 8_000;

async function seed(client: pg.Client, periodEnd: Date): Promise<void> {
  // Organizations, their subscriptions (periods of a month ending at `periodEnd`) and a visa card each, in three
  // statements: what 10,000 sign-ups a month earlier would have left.
  await client.query(
    `insert into organizations (id, created_at, updated_at, name, plan, plan_status)
     select 'org_bench' || lpad(i::text, 11, '0'), $1::timestamptz - interval '1 month', now(), 'Bench ' || i,
            (array['starter', 'pro', 'enterprise'])[1 + i % 3], 'active'
       from generate_series(1, $2::int) as i`,
    [periodEnd, ORGS],
  );
  await client.query(
    `insert into subscriptions (id, created_at, updated_at, organization_id, status, current_period_start,
         current_period_end, billing_anchor, invoice_prefix)
     select 'sub_bench' || lpad(i::text, 11, '0'), now(), now(), 'org_bench' || lpad(i::text, 11, '0'), 'active',
            $1::timestamptz - interval '1 month', $1::timestamptz, $1::timestamptz - interval '1 month',
            'Z' || lpad(i::text, 7, '0')
       from generate_series(1, $2::int) as i`,
    [periodEnd, ORGS],
  );
  await client.query(
    `insert into payment_methods (id, created_at, updated_at, organization_id, type, brand, last4, exp_month,
         exp_year, processor_ref, is_default)
     select 'pm_bench' || lpad(i::text, 12, '0'), now(), now(), 'org_bench' || lpad(i::text, 11, '0'), 'card',
            'visa', '4242', 12, 2034, 'card_sim_visa_bench' || i, true
       from generate_series(1, $1::int) as i`,
    [ORGS],
  );
}

interface Progress {
  invoiced: number;
  distinct_periods: number;
  paid: number;
  first: Date | null;
  last: Date | null;
}

async function progress(client: pg.Client): Promise<Progress> {
  const r = await client.query<Progress>(
    `select count(*)::int as invoiced,
            count(distinct (subscription_id, renewal_of))::int as distinct_periods,
            count(*) filter (where status = 'paid')::int as paid,
            min(created_at) as first, max(created_at) as last
       from invoices where subscription_id like 'sub_bench%' and billing_reason = 'subscription_cycle'`,
  );
  return r.rows[0]!;
}

async function renewals(ctx: BenchContext): Promise<void> {
  const client = new pg.Client({ connectionString: ctx.databaseUrl });
  await client.connect();
  try {
    const periodEnd = new Date(Date.now() + LEAD_MS);
    const seedStart = performance.now();
    await seed(client, periodEnd);
    ctx.report.figure('seeded organizations, subscriptions and cards', ORGS, 'orgs');
    ctx.report.figure('  seeding took', (performance.now() - seedStart) / 1000, 's');
    const deadline = periodEnd.getTime() + 120_000;
    let p = await progress(client);
    while (p.invoiced < ORGS && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      p = await progress(client);
    }
    const last = p.last ? new Date(p.last).getTime() : NaN;
    const first = p.first ? new Date(p.first).getTime() : NaN;
    const allInSeconds = (last - periodEnd.getTime()) / 1000;
    ctx.report.figure('organizations renewed (invoice issued and charged)', p.invoiced, 'orgs', {
      target: `${fmt(ORGS)}`,
      met: p.invoiced === ORGS,
    });
    ctx.report.figure('  billed twice', p.invoiced - p.distinct_periods, 'periods', {
      target: '0',
      met: p.invoiced === p.distinct_periods,
    });
    ctx.report.figure('  paid', p.paid, 'invoices');
    ctx.report.figure('  all invoiced, seconds after the period end', allInSeconds, 's', {
      target: `≤ ${TARGET_SECONDS} s`,
      met: p.invoiced === ORGS && allInSeconds <= TARGET_SECONDS,
    });
    ctx.report.figure('  first invoice after the period end', (first - periodEnd.getTime()) / 1000, 's');
    ctx.report.figure(
      '  renewals per second (first to last invoice)',
      (p.invoiced * 1000) / Math.max(1, last - first),
      '/s',
    );
  } finally {
    await client.end();
  }
}

interface Invoice {
  id: string;
  pdf_url: string;
}

async function pdfLatency(ctx: BenchContext): Promise<void> {
  // Its own organization: the move to pro would otherwise hold the bench organization to pro's monthly API quota,
  // which the loads before this one have long spent (every request after it would answer 429).
  const { token } = await ownEnterpriseOrganization(ctx, 'billing');
  const card = await ctx.api(
    'POST',
    '/v1/billing/payment-methods',
    { payment_method: 'pm_card_visa' },
    token,
  );
  if (card.status !== 201) throw new Error(`adding a card answered ${card.status}`);
  // Enterprise → pro issues a proration invoice.
  const change = await ctx.api<{ invoice: Invoice | null }>(
    'PUT',
    '/v1/billing/subscription',
    { plan: 'pro' },
    token,
  );
  if (change.status !== 200 || !change.body.invoice)
    throw new Error(`the plan change answered ${change.status}`);
  const u = new URL(change.body.invoice.pdf_url);
  const url = `${ctx.server.baseUrl}${u.pathname}${u.search}`;
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < PDF_SAMPLES + 10; i++) {
    const t0 = performance.now();
    const res = await fetch(url);
    const body = Buffer.from(await res.arrayBuffer());
    const ms = performance.now() - t0;
    if (res.status !== 200 || res.headers.get('content-type') !== 'application/pdf') {
      throw new Error(`pdf_url answered ${res.status} ${res.headers.get('content-type')}`);
    }
    bytes = body.length;
    if (i >= 10) times.push(ms); // the first ones warm up pdfkit's font metrics
  }
  times.sort((a, b) => a - b);
  ctx.report.figure(
    `invoice PDF (${fmt(bytes)} bytes), p50 of ${PDF_SAMPLES} requests`,
    times[Math.floor(times.length / 2)]!,
    'ms',
  );
  ctx.report.figure('  p99', times[Math.floor(times.length * 0.99)]!, 'ms');
}

export async function bench(ctx: BenchContext): Promise<void> {
  ctx.report.section(`Billing: ${fmt(ORGS)} renewals at one instant, invoice PDF (PostgreSQL)`);
  await renewals(ctx);
  await pdfLatency(ctx);
}
