import { organizationUpdated } from '../../access/organization.events.js';
import type { Organization } from '../../access/organization.entity.js';
import type { ActorContext } from '../../kit/deps.js';
import { assertPlanFeature } from '../../kit/plan-limit.js';
import { repositoryOf } from '../../kit/runtime.js';
import { conflict } from '../../lib/errors.js';
import { ipRangeSetOf, normalizeIpRanges } from '../../lib/ip-ranges.js';
import { findOrganization, organizationView } from './organization.service.js';
import type { TSecurityOutput, TSecurityPolicy, TSetSecurityInput } from './security.schema.js';

/**
 * The organization's security policy (docs/organization.md, "Security policies"): read by owners and admins, changed
 * by the owner, on the Enterprise plan only (402 `PLAN_LIMIT_EXCEEDED` with `advanced_security` below it, before
 * anything else). It is stored as columns of the organization's row, which the query that loads the caller reads on
 * every request (server/access/actor.ts, security-policy.ts): a change applies from the next request on every
 * process. A change is one transaction under the organization's row lock that also records `organization.updated`;
 * the audit entry is the mutation's own.
 */

function toSecurityDto(org: Organization): TSecurityPolicy {
  return {
    require_two_factor: org.requireTwoFactor,
    allowed_ip_ranges: [...(org.allowedIpRanges ?? [])],
    session_max_age: org.sessionMaxAge ?? null,
  };
}

/** `GET /organization/security`: owner and admin. */
export async function getSecurity(ctx: ActorContext): Promise<TSecurityOutput> {
  assertPlanFeature(ctx.actor, 'advanced_security');
  const org = await findOrganization(
    repositoryOf(ctx.deps, 'organization'),
    ctx.em,
    ctx.actor.organizationId,
  );
  return { success: true, security: toSecurityDto(org) };
}

const sameList = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * `PUT /organization/security`: owner. Fields left out keep their values; `allowed_ip_ranges` replaces the list
 * (stored canonical). A list that leaves out the caller's own address (`ctx.ip`, as `TRUST_PROXY`'s rules give it)
 * is refused with 409: the owner would shut themselves out. `organization.updated` when something changed.
 */
export async function setSecurity(ctx: ActorContext, input: TSetSecurityInput): Promise<TSecurityOutput> {
  assertPlanFeature(ctx.actor, 'advanced_security');
  const ranges =
    input.allowed_ip_ranges === undefined ? undefined : normalizeIpRanges(input.allowed_ip_ranges);
  if (ranges && ranges.length > 0 && !ipRangeSetOf(ranges).contains(ctx.ip)) {
    throw conflict(
      `Your own address (${ctx.ip}) is in none of allowed_ip_ranges: the change would shut you out. Add a range ` +
        'that holds it, or make the change from an address the list allows',
      [{ path: 'allowed_ip_ranges', message: `Holds no range of the caller’s address ${ctx.ip}` }],
    );
  }
  const repository = repositoryOf(ctx.deps, 'organization');
  const security = await repository.transaction(ctx.em, async (tx) => {
    const org = await findOrganization(repository, tx, ctx.actor.organizationId, true);
    // The plan again under the lock: a downgrade committed since the request started wins.
    assertPlanFeature(org, 'advanced_security');
    let changed = false;
    if (input.require_two_factor !== undefined && input.require_two_factor !== org.requireTwoFactor) {
      org.requireTwoFactor = input.require_two_factor;
      changed = true;
    }
    if (ranges !== undefined && !sameList(ranges, org.allowedIpRanges ?? [])) {
      org.allowedIpRanges = ranges;
      changed = true;
    }
    if (input.session_max_age !== undefined && input.session_max_age !== (org.sessionMaxAge ?? null)) {
      org.sessionMaxAge = input.session_max_age;
      changed = true;
    }
    if (changed) {
      await repository.flush(tx);
      const now = ctx.deps.clock.now();
      repository.recordEvent(
        tx,
        organizationUpdated,
        await organizationView(repository, tx, org),
        org.id,
        now,
      );
    }
    return toSecurityDto(org);
  });
  return { success: true, security };
}
