import { LockMode } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { initialPermissions } from '../../access/permissions.js';
import { loadUserDetail } from '../../access/user.dto.js';
import { User } from '../../access/user.entity.js';
import { userUpdated } from '../../access/user.events.js';
import type { Em } from '../../db/orm.js';
import { recordEvent } from '../../events/record-event.js';
import { conflict, forbidden, notFound, validation } from '../../lib/errors.js';
import { isId } from '../../lib/ids.js';
import type { ActorContext } from '../../kit/deps.js';
import { confirmPassword } from '../../kit/login-throttle.js';
import { runOrganizationDeletedHooks } from '../../kit/organization-hooks.js';
import { ORGANIZATION_DELETION_DEADLINE_MS, organizationPurgeJob } from './organization.jobs.js';
import type {
  TDeleteOrganizationInput,
  TDeleteOrganizationOutput,
  TOrganization,
  TOrganizationOutput,
  TTransferOwnershipInput,
  TTransferOwnershipOutput,
  TUpdateOrganizationInput,
} from './organization.schema.js';

const userNotFound = () => notFound('User');

/** The organization's view: its owner and how many users it has (invited, active, suspended; not deleted). */
async function organizationView(em: Em, org: Organization): Promise<TOrganization> {
  const rows = await em.execute<{ owner_id: string | null; users_count: number }[]>(
    `select (select "id" from "users" where "organization_id" = ? and "role" = 'owner' and "deleted_at" is null
              order by "created_at" limit 1) as owner_id,
            (select count(*)::int from "users" where "organization_id" = ? and "deleted_at" is null) as users_count`,
    [org.id, org.id],
  );
  return {
    id: org.id,
    name: org.name,
    plan: org.plan,
    owner_id: rows[0]?.owner_id ?? '',
    users_count: Number(rows[0]?.users_count ?? 0),
    created_at: org.createdAt.toISOString(),
  };
}

/** The caller's organization (never a deleted one: its credentials are refused before this runs). */
async function findOrganization(em: Em, id: string, lock = false): Promise<Organization> {
  const org = await em.findOne(
    Organization,
    { id, deletedAt: null },
    lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
  );
  if (!org) throw notFound('Organization');
  return org;
}

/** `GET /organization`: any user of it. */
export async function getOrganization(ctx: ActorContext): Promise<TOrganizationOutput> {
  const org = await findOrganization(ctx.em, ctx.actor.organizationId);
  return { success: true, organization: await organizationView(ctx.em, org) };
}

/** `PUT /organization {name}`: owner and admin. */
export async function updateOrganization(
  ctx: ActorContext,
  input: TUpdateOrganizationInput,
): Promise<TOrganizationOutput> {
  const organization = await ctx.em.transactional(async (tx) => {
    const org = await findOrganization(tx, ctx.actor.organizationId, true);
    if (org.name !== input.name) {
      org.name = input.name;
      await tx.flush();
    }
    return organizationView(tx, org);
  });
  return { success: true, organization };
}

/**
 * `POST /organization/transfer-ownership {user_id, password}` (owner): the named active admin becomes the owner and
 * the caller an admin, in one transaction under the organization's lock; each gets the permission set of the new
 * role, and `user.updated` is recorded for both.
 */
export async function transferOwnership(
  ctx: ActorContext,
  input: TTransferOwnershipInput,
): Promise<TTransferOwnershipOutput> {
  const { actor } = ctx;
  if (!isId('usr', input.user_id)) throw userNotFound();
  const target = await ctx.em.findOne(User, {
    id: input.user_id,
    organization: actor.organizationId,
    deletedAt: null,
  });
  if (!target) throw userNotFound();
  await confirmPassword(ctx, input.password);
  const now = ctx.deps.clock.now();
  const organization = await ctx.em.transactional(async (tx) => {
    const org = await findOrganization(tx, actor.organizationId, true);
    const lock = { lockMode: LockMode.PESSIMISTIC_WRITE } as const;
    const owner = await tx.findOne(User, { id: actor.userId, organization: org.id, deletedAt: null }, lock);
    const next = await tx.findOne(User, { id: input.user_id, organization: org.id, deletedAt: null }, lock);
    if (!next) throw userNotFound();
    // The caller's role was checked with the token; under the lock, make sure it is still theirs.
    if (!owner || owner.role !== 'owner') {
      throw forbidden('Only the owner can transfer ownership');
    }
    if (next.id === owner.id || next.role !== 'admin' || next.status !== 'active') {
      throw conflict('Ownership can only be transferred to an active admin of the organization');
    }
    next.role = 'owner';
    next.permissions = initialPermissions('owner');
    owner.role = 'admin';
    owner.permissions = initialPermissions('admin');
    await tx.flush();
    const registry = ctx.deps.registry.ownedResources;
    recordEvent(tx, userUpdated, await loadUserDetail(tx, registry, next, now), org.id, now);
    recordEvent(tx, userUpdated, await loadUserDetail(tx, registry, owner, now), org.id, now);
    return organizationView(tx, org);
  });
  return {
    success: true,
    message: 'Ownership transferred: the former owner is now an admin',
    organization,
    previous_owner_id: actor.userId,
  };
}

/**
 * `DELETE /organization {confirm, password}` (owner). In one transaction: the organization is marked deleted (from
 * the commit on, every credential of it is refused: server/access/actor.ts), its login sessions are revoked, every
 * module's `onOrganizationDeleted` runs (VPN disconnections, the subscription's cancellation and final invoice,
 * with their events), and the removal job is queued; the job removes every row (organization.jobs.ts).
 */
export async function deleteOrganization(
  ctx: ActorContext,
  input: TDeleteOrganizationInput,
): Promise<TDeleteOrganizationOutput> {
  const { actor } = ctx;
  const current = await findOrganization(ctx.em, actor.organizationId);
  if (input.confirm !== current.name) {
    throw validation('confirm', 'Must be the organization’s exact name');
  }
  await confirmPassword(ctx, input.password);
  const now = ctx.deps.clock.now();
  await ctx.em.transactional(async (tx) => {
    const org = await findOrganization(tx, actor.organizationId, true);
    org.deletedAt = now;
    await tx.flush();
    await tx.execute(
      `update "login_sessions" set "revoked_at" = ?
        where "revoked_at" is null and "user_id" in (select "id" from "users" where "organization_id" = ?)`,
      [now, org.id],
    );
    await runOrganizationDeletedHooks(ctx.deps, tx, { id: org.id }, now);
    await ctx.deps.jobs.send(organizationPurgeJob, { organization_id: org.id }, { em: tx });
  });
  ctx.deps.jobs.notify(organizationPurgeJob.name);
  return {
    success: true,
    message: 'Organization deleted: every token is refused; its data is being removed',
    id: actor.organizationId,
    deletion_scheduled: new Date(now.getTime() + ORGANIZATION_DELETION_DEADLINE_MS).toISOString(),
  };
}
