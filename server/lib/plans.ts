/** Plan constants (docs/api-conventions.md, "Rate limits and quotas"): the only place they are written down. */
export const PLAN_IDS = ['starter', 'pro', 'enterprise'] as const;
export type PlanId = (typeof PLAN_IDS)[number];

export type Limit = number | 'unlimited';

export interface PlanDefinition {
  id: PlanId;
  name: string;
  price: number;
  currency: 'usd';
  interval: 'month';
  popular: boolean;
  features: {
    vpn_connections: Limit;
    databases: Limit;
    hosting_sites: Limit;
    api_calls: Limit;
    support: 'community' | 'priority' | 'dedicated';
    sso?: boolean;
    advanced_security?: boolean;
  };
}

export const PLANS: Record<PlanId, PlanDefinition> = {
  starter: {
    id: 'starter',
    name: 'Starter',
    price: 29,
    currency: 'usd',
    interval: 'month',
    popular: false,
    features: {
      vpn_connections: 10,
      databases: 2,
      hosting_sites: 5,
      api_calls: 10_000,
      support: 'community',
    },
  },
  pro: {
    id: 'pro',
    name: 'Pro',
    price: 79,
    currency: 'usd',
    interval: 'month',
    popular: true,
    features: {
      vpn_connections: 50,
      databases: 10,
      hosting_sites: 25,
      api_calls: 100_000,
      support: 'priority',
    },
  },
  enterprise: {
    id: 'enterprise',
    name: 'Enterprise',
    price: 199,
    currency: 'usd',
    interval: 'month',
    popular: false,
    features: {
      vpn_connections: 'unlimited',
      databases: 'unlimited',
      hosting_sites: 'unlimited',
      api_calls: 'unlimited',
      support: 'dedicated',
      sso: true,
      advanced_security: true,
    },
  },
};

export const DEFAULT_PLAN: PlanId = 'starter';

/**
 * The state of an organization's subscription, kept on the organization (written by billing) so that the plan-limit
 * check reads plan and state together: a `canceled` organization may create nothing a plan counts.
 */
export const PLAN_STATUSES = ['active', 'past_due', 'canceled'] as const;
export type PlanStatus = (typeof PLAN_STATUSES)[number];

/** The plan features that have a numeric limit (usage is counted against them). */
export const PLAN_FEATURES = ['vpn_connections', 'databases', 'hosting_sites', 'api_calls'] as const;
export type PlanFeature = (typeof PLAN_FEATURES)[number];
/** The features counted by creating resources (402 `PLAN_LIMIT_EXCEEDED` beyond them). */
export type CountedPlanFeature = Exclude<PlanFeature, 'api_calls'>;

/** The numeric limit of a plan feature; Infinity for `unlimited`; 0 for a canceled subscription's counted features. */
export function planLimit(plan: PlanId, feature: PlanFeature, status: PlanStatus = 'active'): number {
  if (status === 'canceled' && feature !== 'api_calls') return 0;
  const v = PLANS[plan].features[feature];
  return v === 'unlimited' ? Number.POSITIVE_INFINITY : v;
}
