import { LockMode } from '@mikro-orm/core';
import { Organization } from '../access/organization.entity.js';
import type { Em } from '../db/orm.js';
import { planLimitExceeded } from '../lib/errors.js';
import { planLimit, type CountedPlanFeature } from '../lib/plans.js';
import type { AppDeps } from './deps.js';

const LABELS: Record<CountedPlanFeature, string> = {
  vpn_connections: 'VPN connections',
  databases: 'databases',
  hosting_sites: 'hosting sites',
};

/**
 * The plan-limit check of every create that a plan counts (docs/billing.md, "Plans"): 402 `PLAN_LIMIT_EXCEEDED`
 * with `details: [{resource, limit, current}]` when the organization already uses its plan's limit.
 *
 * Call it first inside the transaction that creates the resource. It reads the organization's plan under a share
 * lock, held to the commit: a plan change (an update of the row) waits for the creates under way and the creates
 * after it check the new plan, while creates do not wait for each other on the row, nor block the other writes of the
 * organization (rows that reference it). Only where the plan sets a limit do the creates of one resource of one
 * organization queue, on a transaction-level advisory lock of their own (on the database, so across processes too),
 * and each counts what the previous ones committed: a limit is never overshot.
 */
export async function assertWithinPlan(
  tx: Em,
  deps: AppDeps,
  organizationId: string,
  feature: CountedPlanFeature,
): Promise<void> {
  await checkPlan(tx, deps, organizationId, feature, true);
}

/**
 * The same check without a lock, before a create spends something that is not given back (a VPN server's tunnel
 * address): an organization at its limit is refused without it. Not exact under concurrency, so the create still
 * calls {@link assertWithinPlan} in its transaction.
 */
export async function precheckPlan(
  em: Em,
  deps: AppDeps,
  organizationId: string,
  feature: CountedPlanFeature,
): Promise<void> {
  await checkPlan(em, deps, organizationId, feature, false);
}

async function checkPlan(
  em: Em,
  deps: AppDeps,
  organizationId: string,
  feature: CountedPlanFeature,
  locked: boolean,
): Promise<void> {
  const org = await em.findOneOrFail(
    Organization,
    organizationId,
    locked ? { lockMode: LockMode.PESSIMISTIC_READ } : { refresh: true },
  );
  // A canceled subscription allows nothing new (limit 0); reads and deletes go on.
  const limit = planLimit(org.plan, feature, org.planStatus);
  if (!Number.isFinite(limit)) return;
  if (locked) {
    await em.execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [
      `plan-limit:${organizationId}:${feature}`,
    ]);
  }
  const current = await deps.registry.usage.current(em, organizationId, feature, deps.clock.now());
  if (current >= limit) {
    const message =
      org.planStatus === 'canceled'
        ? `The subscription is canceled: no new ${LABELS[feature]} until a plan is chosen again with ` +
          'PUT /v1/billing/subscription'
        : `Your plan allows ${limit} ${LABELS[feature]}: delete one, or upgrade the plan with ` +
          'PUT /v1/billing/subscription (the plans: GET /v1/billing/plans)';
    throw planLimitExceeded(message, { resource: feature, limit, current });
  }
}
