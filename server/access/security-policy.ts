import { ipNotAllowed, twoFactorRequired } from '../lib/errors.js';
import { ipRangeSetOf, type IpRangeSet } from '../lib/ip-ranges.js';
import { PLANS, type PlanId } from '../lib/plans.js';
import type { SessionMethod } from './session.entity.js';

/**
 * The organization's security policy as every request applies it (docs/organization.md, "Security policies"). It is
 * stored as columns of the organization's row and read by the one query that loads the caller (actor.ts), so it
 * costs no query of its own and a change made through any process applies from the next request on every process.
 * The policy is the Enterprise plan's ("advanced security"): below it the stored policy is kept but not applied, as
 * an owner could neither see nor change it there.
 */
export interface SecurityPolicy {
  /** Users without two-factor sign-in who did not sign in through SSO get 403 `TWO_FACTOR_REQUIRED`. */
  readonly requireTwoFactor: boolean;
  /** The address ranges users and API keys may call from; null: any address. */
  readonly allowedIpRanges: IpRangeSet | null;
  /** The longest a login session lives after its sign-in, in seconds; null: the server's `SESSION_MAX_AGE` alone. */
  readonly sessionMaxAgeSeconds: number | null;
}

/** The columns of `organizations` the policy is stored in, as the caller's query returns them. */
export interface StoredSecurityPolicy {
  plan: PlanId;
  require_two_factor: boolean;
  allowed_ip_ranges: string[] | null;
  session_max_age: number | null;
}

/** Whether `plan` includes the policies ("advanced security", docs/billing.md). */
export const planHasSecurityPolicies = (plan: PlanId): boolean =>
  PLANS[plan].features.advanced_security === true;

/**
 * The organization's `session_max_age` in force (seconds), from its row as the ORM loads it; null when it has none or
 * its plan does not include the policies.
 */
export function sessionMaxAgeOf(org: { plan: PlanId; sessionMaxAge?: number | null }): number | null {
  if (org.sessionMaxAge === null || org.sessionMaxAge === undefined) return null;
  return planHasSecurityPolicies(org.plan) ? org.sessionMaxAge : null;
}

/** The policy that applies to the organization of `row`; null when none does (nothing set, or not on the plan). */
export function policyInForce(row: StoredSecurityPolicy): SecurityPolicy | null {
  const ranges = Array.isArray(row.allowed_ip_ranges) ? row.allowed_ip_ranges : [];
  if (!row.require_two_factor && ranges.length === 0 && row.session_max_age === null) return null;
  if (!planHasSecurityPolicies(row.plan)) return null;
  return {
    requireTwoFactor: row.require_two_factor,
    allowedIpRanges: ranges.length === 0 ? null : ipRangeSetOf(ranges),
    sessionMaxAgeSeconds: row.session_max_age === null ? null : Number(row.session_max_age),
  };
}

/**
 * Procedures a user without two-factor may still call under `require_two_factor`: who am I, sign out, and turning
 * two-factor on (docs/organization.md, "Security policies").
 */
export const TWO_FACTOR_EXEMPT_PROCEDURES: ReadonlySet<string> = new Set([
  'auth.me',
  'auth.logout',
  'auth.twoFactor.setup',
  'auth.twoFactor.enable',
]);

/** What the check reads of the caller (server/access/actor.ts). */
export interface PolicySubject {
  policy?: SecurityPolicy | null;
  /** Set for API keys: they are not a user signing in, so the two-factor rule does not apply to them. */
  apiKeyId?: string;
  /** How the access token's session signed in (none for API keys). */
  sessionMethod?: SessionMethod;
  user: { twoFactorEnabled: boolean };
}

/**
 * Applies the caller's organization's policy to a request from `ip` (the client address under `TRUST_PROXY`'s rules)
 * to the procedure at `path`: 403 `IP_NOT_ALLOWED` outside the allowed ranges (users and API keys alike), then 403
 * `TWO_FACTOR_REQUIRED` for a user without two-factor whose session did not come from single sign-on, on every
 * procedure but {@link TWO_FACTOR_EXEMPT_PROCEDURES}. The session's age is checked where the session is loaded
 * (actor.ts, and the refresh).
 */
export function enforceSecurityPolicy(subject: PolicySubject, ip: string, path: string): void {
  const policy = subject.policy;
  if (!policy) return;
  if (policy.allowedIpRanges && !policy.allowedIpRanges.contains(ip)) throw ipNotAllowed(ip);
  if (
    policy.requireTwoFactor &&
    subject.apiKeyId === undefined &&
    !subject.user.twoFactorEnabled &&
    subject.sessionMethod !== 'sso' &&
    !TWO_FACTOR_EXEMPT_PROCEDURES.has(path)
  ) {
    throw twoFactorRequired();
  }
}

/**
 * When a login session signed in at `createdAt` ends under the organization's `sessionMaxAgeSeconds`: the earlier of
 * its stored end (`expiresAt`: 30 days after its last refresh, never past the server's `SESSION_MAX_AGE`) and the
 * policy's bound.
 */
export function sessionEndUnder(
  maxAgeSeconds: number | null | undefined,
  createdAt: Date,
  expiresAt: Date,
): Date {
  if (maxAgeSeconds === null || maxAgeSeconds === undefined) return expiresAt;
  const bound = createdAt.getTime() + maxAgeSeconds * 1000;
  return bound < expiresAt.getTime() ? new Date(bound) : expiresAt;
}
