import type { Role, User } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import type { AppDeps, RequestContext } from '../../kit/deps.js';
import { ssoRequired } from '../../lib/errors.js';
import { PLANS, type PlanId } from '../../lib/plans.js';
import { authRepositoryOf } from './auth.repository.js';
import { ssoRepositoryOf } from './sso.repository.js';

/**
 * An organization's enforced single sign-on (docs/sso.md, "Enforced sign-in"): with `enforced: true`, its users but
 * the owner sign in through the identity provider only. Password login, password reset and two-factor set-up are
 * refused them with 403 `SSO_REQUIRED` (a reset request still answers 202 but mails nothing); the owner keeps the
 * password login as a way in when the identity provider fails (break-glass), and each such login is audited as
 * `auth.sso_break_glass`. API keys are not sign-ins and keep working.
 *
 * Enforcement holds only while the organization's plan includes single sign-on: `POST /auth/sso/start` answers
 * nothing below it, so its users keep their passwords then.
 */

/** How a password sign-in of `user` stands against its organization's single sign-on. */
export type PasswordSignIn = 'allowed' | 'sso-required' | 'break-glass';

/** 403 `SSO_REQUIRED`, whose message names `POST /v1/auth/sso/start`. */
export const ssoRequiredError = () => ssoRequired();

/** The domain of an address: what follows its last `@`, lower-cased. */
export const emailDomain = (email: string) => email.slice(email.lastIndexOf('@') + 1).toLowerCase();

/**
 * Login, before any password check: an address of a domain verified by an organization that enforces single sign-on
 * is refused unless it is that organization's owner. It tells no more than `POST /auth/sso/start` does for the same
 * address (the domain routes to an identity provider), and nothing of whether an account has the address.
 */
export async function refuseEnforcedDomain(ctx: RequestContext, email: string): Promise<void> {
  const connection = await ssoRepositoryOf(ctx.deps).findEnforcedConnectionByDomain(
    ctx.em,
    emailDomain(email),
  );
  const organization = connection?.organization;
  if (!organization || organization.deletedAt || !PLANS[organization.plan as PlanId].features.sso) return;
  const account = await authRepositoryOf(ctx.deps).findSignInAccount(ctx.em, email);
  if (account?.role === 'owner' && account.organization.id === organization.id) return;
  throw ssoRequiredError();
}

/** Who is signing in or asking: a user's role, organization and its plan. */
export interface Member {
  role: Role;
  organizationId: string;
  plan: PlanId;
}

export const memberOf = (user: User): Member => ({
  role: user.role,
  organizationId: user.organization.id,
  plan: user.organization.plan,
});

/** Whether the organization of `member` enforces single sign-on now (its plan includes it). */
async function organizationEnforces(deps: AppDeps, em: Em, member: Member): Promise<boolean> {
  if (!PLANS[member.plan].features.sso) return false;
  const connection = await ssoRepositoryOf(deps).findConnection(em, member.organizationId);
  return connection?.enforced === true;
}

/**
 * After a right password (and before the two-factor step): whether the user may go on with a password. Refused users
 * learn it only once the password was right, so a wrong one keeps answering 401 and nothing is told about accounts.
 */
export async function passwordSignInOf(ctx: RequestContext, user: User): Promise<PasswordSignIn> {
  const member = memberOf(user);
  if (!(await organizationEnforces(ctx.deps, ctx.em, member))) return 'allowed';
  return member.role === 'owner' ? 'break-glass' : 'sso-required';
}

/** Whether single sign-on is required of `member`: its organization enforces it and it is not the owner. */
export async function ssoRequiredOf(deps: AppDeps, em: Em, member: Member): Promise<boolean> {
  return member.role !== 'owner' && (await organizationEnforces(deps, em, member));
}

/**
 * Password reset and two-factor set-up: refused (403 `SSO_REQUIRED`) to the users of an organization that enforces
 * single sign-on, but its owner.
 */
export async function assertNoSsoRequired(deps: AppDeps, em: Em, member: Member): Promise<void> {
  if (await ssoRequiredOf(deps, em, member)) throw ssoRequiredError();
}

/**
 * The audit action of the owner's password sign-in while single sign-on is enforced (docs/audit-log.md, "Audit
 * log"): written with the session it opens (completeLogin, login-completion.ts).
 */
export const BREAK_GLASS_ACTION = 'auth.sso_break_glass';
