import { LockMode } from '@mikro-orm/core';
import { Organization } from '../access/organization.entity.js';
import type { Em } from '../db/orm.js';
import { planLimitExceeded } from '../lib/errors.js';
import {
  PLAN_IDS,
  PLANS,
  planLimit,
  type CountedPlanFeature,
  type PlanId,
  type PlanStatus,
} from '../lib/plans.js';

/** An organization's plan and the state of its subscription: what the plan-limit rule reads of it. */
export interface OrganizationPlan {
  plan: PlanId;
  status: PlanStatus;
}

const LABELS: Record<CountedPlanFeature, string> = {
  vpn_connections: 'VPN connections',
  databases: 'databases',
  hosting_sites: 'hosting sites',
};

/**
 * The plan-limit rule of every create that a plan counts (docs/billing.md, "Plans"): 402 `PLAN_LIMIT_EXCEEDED`
 * with `details: [{resource, limit, current}]` when the organization already uses its plan's limit. A canceled
 * subscription allows nothing new (limit 0); reads and deletes go on.
 *
 * A service calls it first inside the transaction that creates the resource, with what the module's repository
 * reads there: `organization`, the plan read under a share lock held to the commit ({@link lockOrganizationPlan}),
 * so that a plan change (an update of the row) waits for the creates under way and the creates after it check the
 * new plan, while creates do not wait for each other on the row, nor block the other writes of the organization
 * (rows that reference it); and `count`, called only where the plan sets a limit, which first queues the creates of
 * the resource of the organization on a transaction-level advisory lock of their own ({@link lockPlanCounter}: on
 * the database, so across processes too) and then counts, so each create counts what the previous ones committed
 * and a limit is never overshot.
 *
 * With a plan read and a count taken without a lock, it is a precheck, before a create spends something that is
 * not given back (a VPN server's tunnel address): not exact under concurrency, so the create checks again in its
 * transaction.
 */
export async function assertWithinPlan(
  organization: OrganizationPlan,
  feature: CountedPlanFeature,
  count: () => Promise<number>,
): Promise<void> {
  const limit = planLimit(organization.plan, feature, organization.status);
  if (!Number.isFinite(limit)) return;
  const current = await count();
  if (current >= limit) {
    const message =
      organization.status === 'canceled'
        ? `The subscription is canceled: no new ${LABELS[feature]} until a plan is chosen again with ` +
          'PUT /v1/billing/subscription'
        : `Your plan allows ${limit} ${LABELS[feature]}: delete one, or upgrade the plan with ` +
          'PUT /v1/billing/subscription (the plans: GET /v1/billing/plans)';
    throw planLimitExceeded(message, { resource: feature, limit, current });
  }
}

/** The features a plan has or has not (`PLANS[…].features`), with what they are called in messages. */
const FEATURE_LABELS = { sso: 'Single sign-on', advanced_security: 'Advanced security' } as const;
export type PlanFeatureFlag = keyof typeof FEATURE_LABELS;

/**
 * The rule of the features only some plans have (docs/billing.md, "Plans"): 402 `PLAN_LIMIT_EXCEEDED` with
 * `details: [{resource: feature, limit: 0, current: 0}]` and a message naming the plans that have it, when the
 * organization's plan does not.
 */
export function assertPlanFeature(
  organization: Pick<OrganizationPlan, 'plan'>,
  feature: PlanFeatureFlag,
): void {
  if (PLANS[organization.plan].features[feature] === true) return;
  const withIt = PLAN_IDS.filter((id) => PLANS[id].features[feature] === true).map((id) => PLANS[id].name);
  throw planLimitExceeded(
    `${FEATURE_LABELS[feature]} needs the ${withIt.join(' or ')} plan: upgrade with PUT /v1/billing/subscription ` +
      '(the plans: GET /v1/billing/plans)',
    { resource: feature, limit: 0, current: 0 },
  );
}

/**
 * The organization's plan under a share lock held to the commit (the repositories' `lockPlan`, for
 * {@link assertWithinPlan}).
 */
export async function lockOrganizationPlan(tx: Em, organizationId: string): Promise<OrganizationPlan> {
  const org = await tx.findOneOrFail(Organization, organizationId, { lockMode: LockMode.PESSIMISTIC_READ });
  return { plan: org.plan, status: org.planStatus };
}

/** The organization's plan as last committed, without a lock (a precheck's). */
export async function readOrganizationPlan(em: Em, organizationId: string): Promise<OrganizationPlan> {
  const org = await em.findOneOrFail(Organization, organizationId, { refresh: true });
  return { plan: org.plan, status: org.planStatus };
}

/**
 * Queues the creates of `counter` (a plan feature, or another thing a plan bounds) of one organization until the
 * transaction ends: a transaction-level advisory lock, taken before the count the plan-limit rule compares.
 */
export async function lockPlanCounter(tx: Em, organizationId: string, counter: string): Promise<void> {
  await tx.execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [
    `plan-limit:${organizationId}:${counter}`,
  ]);
}
