import type { EntityName, FindOneOptions } from '@mikro-orm/core';
import type { Em } from '../db/orm.js';
import { notFound } from '../lib/errors.js';
import { isId, type IdPrefix } from '../lib/ids.js';
import type { Actor } from './actor.js';

/**
 * Tenant and owner scoping (docs/users-and-permissions.md), the one place every module takes it from. Scope lives in the query
 * itself, so a row outside it is simply not found: another organization's id, or for a member another user's, is a
 * 404 and never a 403 that would confirm it exists.
 */

/** True for the roles that act on every resource of their organization (docs/users-and-permissions.md). */
export function actsOnWholeOrganization(actor: Actor): boolean {
  return actor.role === 'owner' || actor.role === 'admin';
}

/**
 * The filter for acting on one user-owned resource: the caller's organization and, for members, their own rows.
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

/**
 * The filter of a list of user-owned resources: the caller's own rows by default. Owners and admins may name
 * another user of their organization (`?user_id=`); a member naming anyone but themselves gets an empty list.
 */
export function ownedListFilter(
  actor: Actor,
  opts: { ownerField?: string; userId?: string | undefined } = {},
): Record<string, unknown> {
  const ownerField = opts.ownerField ?? 'user';
  const wanted = opts.userId ?? actor.userId;
  if (wanted !== actor.userId && !actsOnWholeOrganization(actor)) {
    return { organization: actor.organizationId, [ownerField]: actor.userId, id: { $in: [] } };
  }
  return { organization: actor.organizationId, [ownerField]: wanted };
}

/**
 * Loads one row by id within `scope` (from ownedBy / inOrganization, plus any extra conditions such as
 * `deletedAt: null`), or throws NOT_FOUND. A malformed id is not found without a query.
 */
export async function findScopedOrThrow<T extends object, P extends string = never>(
  em: Em,
  entity: EntityName<T>,
  id: string,
  scope: Record<string, unknown>,
  opts: { prefix: IdPrefix; what?: string } & FindOneOptions<T, P>,
): Promise<T> {
  const { prefix, what, ...findOptions } = opts;
  if (!isId(prefix, id)) throw notFound(what);
  const row = await em.findOne(entity, { ...scope, id } as never, findOptions as never);
  if (!row) throw notFound(what);
  return row;
}
