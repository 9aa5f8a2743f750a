import { repositoryOf } from '../../kit/runtime.js';
import type { Em } from '../../db/orm.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import { USAGE_METRICS, type UsageMetric, type UsagePeriod } from '../../kit/usage.js';
import { iso } from '../../lib/time.js';
import type { TUsageReportOutput } from './billing.schema.js';
import { planPriceCents } from './invoicing.js';
import { toUnits } from './money.js';
import { addOnLines } from './renewals.js';

/** Every measure of the report from the modules' reporters; 0 for measures no installed module reports. */
export async function collectUsage(
  em: Em,
  deps: AppDeps,
  organizationId: string,
  period: UsagePeriod,
  now: Date,
  only?: UsageMetric,
): Promise<Record<UsageMetric, number>> {
  const out = Object.fromEntries(USAGE_METRICS.map((m) => [m, 0])) as Record<UsageMetric, number>;
  for (const reporter of deps.registry.usageReporters) {
    if (only && !reporter.metrics.includes(only)) continue;
    const values = await reporter.report(em, organizationId, period, now);
    for (const m of reporter.metrics) out[m] = values[m] ?? 0;
  }
  return out;
}

/** API requests of the period, as the usage report counts them (the subscription's `usage.api_calls`). */
export async function apiRequestsInPeriod(
  em: Em,
  deps: AppDeps,
  organizationId: string,
  period: UsagePeriod,
  now: Date,
): Promise<number> {
  return (await collectUsage(em, deps, organizationId, period, now, 'api.requests'))['api.requests'];
}

export async function usageReport(ctx: ActorContext): Promise<TUsageReportOutput> {
  const now = ctx.deps.clock.now();
  const sub = await repositoryOf(ctx.deps, 'billing').subscriptionOf(ctx.em, ctx.actor.organizationId);
  const org = sub.organization;
  const period = { start: sub.currentPeriodStart, end: sub.currentPeriodEnd };
  const u = await collectUsage(ctx.em, ctx.deps, org.id, period, now);
  const canceled = sub.status === 'canceled';
  const basePlan = canceled ? 0 : planPriceCents(org.plan);
  const addOns = canceled
    ? 0
    : (await addOnLines(ctx.em, ctx.deps, org.id, period, now)).reduce((s, l) => s + l.amount, 0);
  return {
    success: true,
    current_period: { start: iso(period.start)!, end: iso(period.end)! },
    usage: {
      vpn: {
        connections: u['vpn.connections'],
        data_transfer_gb: u['vpn.data_transfer_gb'],
        server_hours: u['vpn.server_hours'],
      },
      database: {
        instances: u['database.instances'],
        storage_gb: u['database.storage_gb'],
        compute_hours: u['database.compute_hours'],
      },
      hosting: {
        sites: u['hosting.sites'],
        bandwidth_gb: u['hosting.bandwidth_gb'],
        build_minutes: u['hosting.build_minutes'],
      },
      api: {
        requests: u['api.requests'],
        rate_limit_hits: u['api.rate_limit_hits'],
        webhook_deliveries: u['api.webhook_deliveries'],
      },
    },
    costs: {
      base_plan: toUnits(basePlan),
      overages: 0,
      add_ons: toUnits(addOns),
      total: toUnits(basePlan + addOns),
    },
    currency: 'usd',
  };
}
