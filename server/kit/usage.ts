import type { Em } from '../db/orm.js';
import type { PlanFeature } from '../lib/plans.js';

/**
 * How a module counts what an organization uses of a plan feature (the current value of `vpn_connections`,
 * `databases`, `hosting_sites`, `api_calls`). Declared in the module's manifest; the plan-limit check and billing
 * read every feature through the registry without importing the module that counts it.
 */
export interface UsageCounter {
  feature: PlanFeature;
  /** The organization's current usage; inside a transaction, what that transaction sees. */
  count(em: Em, organizationId: string, now: Date): Promise<number>;
}

/** The counters of every module, by feature. */
export class UsageRegistry {
  private readonly counters = new Map<PlanFeature, UsageCounter>();

  constructor(counters: readonly UsageCounter[]) {
    for (const c of counters) {
      if (this.counters.has(c.feature)) throw new Error(`two modules count the plan feature ${c.feature}`);
      this.counters.set(c.feature, c);
    }
  }

  /** Features some module counts. */
  features(): PlanFeature[] {
    return [...this.counters.keys()];
  }

  /** The current usage of `feature`; 0 when no module counts it (a module not installed uses nothing). */
  async current(em: Em, organizationId: string, feature: PlanFeature, now: Date): Promise<number> {
    const counter = this.counters.get(feature);
    return counter ? counter.count(em, organizationId, now) : 0;
  }
}

/** A billing period, or any window usage is reported for: `[start, end)`. */
export interface UsagePeriod {
  start: Date;
  end: Date;
}

/** The measures of the usage report (`GET /billing/usage`), `<group>.<measure>` as the report nests them. */
export const USAGE_METRICS = [
  'vpn.connections',
  'vpn.data_transfer_gb',
  'vpn.server_hours',
  'database.instances',
  'database.storage_gb',
  'database.compute_hours',
  'hosting.sites',
  'hosting.bandwidth_gb',
  'hosting.build_minutes',
  'api.requests',
  'api.rate_limit_hits',
  'api.webhook_deliveries',
] as const;
export type UsageMetric = (typeof USAGE_METRICS)[number];

/** A resource billed by the time it existed (a database's size price, prorated to the period). */
export interface AddOnUsage {
  resourceId: string;
  /** Shown on the invoice line, e.g. `Database orders (medium)`. */
  description: string;
  /** The resource's price for a whole month, in cents. */
  monthlyPriceCents: number;
  /** Seconds the resource existed within the period. */
  seconds: number;
}

/**
 * What a module contributes to an organization's usage report and invoices, from its own records. Declared in the
 * manifest (`usageReport`); billing reads every module's through the registry.
 */
export interface UsageReporter {
  /** The measures this module reports (each measure is reported by one module). */
  metrics: readonly UsageMetric[];
  report(
    em: Em,
    organizationId: string,
    period: UsagePeriod,
    now: Date,
  ): Promise<Partial<Record<UsageMetric, number>>>;
  /** Resources billed by the time they existed in the period. */
  addOns?(em: Em, organizationId: string, period: UsagePeriod, now: Date): Promise<AddOnUsage[]>;
}
