import type { Actor } from './actor.js';

/** True for the roles that act on every resource of their organization (conventions §5). */
export function actsOnWholeOrganization(actor: Actor): boolean {
  return actor.role === 'owner' || actor.role === 'admin';
}

/**
 * The filter every module puts in its queries: the caller's organization and, for members, their own resources.
 * Anything outside it is simply not found (404), never "forbidden".
 *
 * `ownerField` names the entity's relation to the user who owns the row (`user` by default).
 */
export function ownedBy(actor: Actor, ownerField = 'user'): Record<string, string> {
  const filter: Record<string, string> = { organization: actor.organizationId };
  if (!actsOnWholeOrganization(actor)) filter[ownerField] = actor.userId;
  return filter;
}

/** The organization filter alone, for resources that belong to the organization rather than a user. */
export function inOrganization(actor: Actor): { organization: string } {
  return { organization: actor.organizationId };
}
