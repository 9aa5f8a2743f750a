import { repositoryOf } from '../../kit/runtime.js';
import type { Organization } from '../../access/organization.entity.js';
import { initialPermissions } from '../../access/permissions.js';
import { loadUserDetail } from '../../access/user.dto.js';
import { organizationUpdated } from '../../access/organization.events.js';
import { userUpdated } from '../../access/user.events.js';
import type { Em } from '../../db/orm.js';
import { conflict, forbidden, notFound, validation } from '../../lib/errors.js';
import { isId } from '../../lib/ids.js';
import type { ActorContext } from '../../kit/deps.js';
import { confirmPassword } from '../../access/login-throttle.js';
import { runOrganizationDeletedHooks } from '../../kit/organization-hooks.js';
import { ORGANIZATION_DELETION_DEADLINE_MS, organizationPurgeJob } from './organization.jobs.js';
import type { OrganizationRepository } from './organization.repository.js';
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
export async function organizationView(
  repository: OrganizationRepository,
  em: Em,
  org: Organization,
): Promise<TOrganization> {
  const people = await repository.people(em, org.id);
  return {
    id: org.id,
    name: org.name,
    plan: org.plan,
    owner_id: people.ownerId ?? '',
    users_count: people.usersCount,
    created_at: org.createdAt.toISOString(),
  };
}

/** The caller's organization (never a deleted one: its credentials are refused before this runs). */
export async function findOrganization(
  repository: OrganizationRepository,
  em: Em,
  id: string,
  lock = false,
): Promise<Organization> {
  const org = await repository.findOrganization(em, id, lock);
  if (!org) throw notFound('Organization');
  return org;
}

/** `GET /organization`: any user of it. */
export async function getOrganization(ctx: ActorContext): Promise<TOrganizationOutput> {
  const repository = repositoryOf(ctx.deps, 'organization');
  const org = await findOrganization(repository, ctx.em, ctx.actor.organizationId);
  return { success: true, organization: await organizationView(repository, ctx.em, org) };
}

/** `PUT /organization {name}`: owner and admin; `organization.updated` when the name changes. */
export async function updateOrganization(
  ctx: ActorContext,
  input: TUpdateOrganizationInput,
): Promise<TOrganizationOutput> {
  const repository = repositoryOf(ctx.deps, 'organization');
  const organization = await repository.transaction(ctx.em, async (tx) => {
    const org = await findOrganization(repository, tx, ctx.actor.organizationId, true);
    if (org.name === input.name) return organizationView(repository, tx, org);
    org.name = input.name;
    await repository.flush(tx);
    const view = await organizationView(repository, tx, org);
    repository.recordEvent(tx, organizationUpdated, view, org.id, ctx.deps.clock.now());
    return view;
  });
  return { success: true, organization };
}

/**
 * `POST /organization/transfer-ownership {user_id, password}` (owner): the named active admin becomes the owner and
 * the caller an admin, in one transaction under the organization's lock; each gets the permission set of the new
 * role, and `user.updated` is recorded for both, then `organization.updated` (its `owner_id` changed).
 */
export async function transferOwnership(
  ctx: ActorContext,
  input: TTransferOwnershipInput,
): Promise<TTransferOwnershipOutput> {
  const { actor } = ctx;
  if (!isId('usr', input.user_id)) throw userNotFound();
  const repository = repositoryOf(ctx.deps, 'organization');
  const target = await repository.findUser(ctx.em, actor.organizationId, input.user_id);
  if (!target) throw userNotFound();
  await confirmPassword(ctx, input.password);
  const now = ctx.deps.clock.now();
  const organization = await repository.transaction(ctx.em, async (tx) => {
    const org = await findOrganization(repository, tx, actor.organizationId, true);
    const owner = await repository.findUser(tx, org.id, actor.userId, true);
    const next = await repository.findUser(tx, org.id, input.user_id, true);
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
    await repository.flush(tx);
    const registry = ctx.deps.registry.ownedResources;
    repository.recordEvent(tx, userUpdated, await loadUserDetail(tx, registry, next, now), org.id, now);
    repository.recordEvent(tx, userUpdated, await loadUserDetail(tx, registry, owner, now), org.id, now);
    const view = await organizationView(repository, tx, org);
    repository.recordEvent(tx, organizationUpdated, view, org.id, now);
    return view;
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
  const repository = repositoryOf(ctx.deps, 'organization');
  const current = await findOrganization(repository, ctx.em, actor.organizationId);
  if (input.confirm !== current.name) {
    throw validation('confirm', 'Must be the organization’s exact name');
  }
  await confirmPassword(ctx, input.password);
  const now = ctx.deps.clock.now();
  await repository.transaction(ctx.em, async (tx) => {
    const org = await findOrganization(repository, tx, actor.organizationId, true);
    org.deletedAt = now;
    await repository.flush(tx);
    await repository.revokeSessions(tx, org.id, now);
    await runOrganizationDeletedHooks(ctx.deps, tx, { id: org.id }, now);
    await ctx.deps.jobs.send(organizationPurgeJob, { organization_id: org.id }, { em: tx });
  });
  return {
    success: true,
    message: 'Organization deleted: every token is refused; its data is being removed',
    id: actor.organizationId,
    deletion_scheduled: new Date(now.getTime() + ORGANIZATION_DELETION_DEADLINE_MS).toISOString(),
  };
}
