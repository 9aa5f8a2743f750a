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
