import { repositoryOf } from '../../kit/runtime.js';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import type { Actor } from '../../access/actor.js';
import {
  applyPermissionObject,
  effectivePermissions,
  initialPermissions,
  normalizePermissions,
  toPermissionObject,
  type Permission,
} from '../../access/permissions.js';
import type { Role, User } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import { noteAuditActor } from '../../events/audit.js';
import { randomToken, sha256Hex } from '../../lib/crypto.js';
import { conflict, forbidden, invalidCredentials, notFound } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import { userCreated, userDeleted, userUpdated } from '../../access/user.events.js';
import type { ActorContext, AppDeps, RequestContext } from '../../kit/deps.js';
import type { UserInvitation } from './user-invitation.entity.js';
import type { UsersRepository } from './users.repository.js';
import {
  loadUserDetail,
  toUserDetailDto,
  toUserSummaryDto,
  type TUserDetail,
} from '../../access/user.dto.js';
import type {
  TAcceptInvitationInput,
  TCreateUserInput,
  TListUsersInput,
  TUpdatePermissionsInput,
  TUpdateUserInput,
} from './users.schema.js';

export const INVITATION_TTL_MS = 7 * 86_400_000;

const USER_NOT_FOUND = () => notFound('User');
const INVALID_INVITATION = () =>
  invalidCredentials(
    'Invalid, expired or already used invitation token: ask an admin of the organization for a new invitation',
  );
const ACCOUNT_ELSEWHERE = () =>
  conflict(
    'This email address already has an account in another organization, and an address has one account: sign in ' +
      'with it, or ask the organization that invited you to invite another address',
  );

/** A unique index refused the write (SQLSTATE 23505), whichever class the error reached us as. */
function isUniqueViolation(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const x = e as Error & { code?: unknown };
    if (e instanceof UniqueConstraintViolationException || x.code === '23505') return true;
  }
  return false;
}

/**
 * Loads a user the caller may see, or NOT_FOUND: users of the caller's organization that are not deleted; for a
 * caller without `users:read`, only themselves. `lock` takes a row lock (inside a transaction).
 */
async function findVisibleUserOrThrow(
  repository: UsersRepository,
  em: Em,
  actor: Actor,
  id: string,
  lock = false,
): Promise<User> {
  if (!isId('usr', id)) throw USER_NOT_FOUND();
  if (id !== actor.userId && !actor.permissions.has('users:read')) throw USER_NOT_FOUND();
  const user = await repository.findUser(em, actor.organizationId, id, lock);
  if (!user) throw USER_NOT_FOUND();
  return user;
}

/** The detail view of `user` (server/access/user.dto.ts). */
export function userDetail(deps: AppDeps, em: Em, user: User, now: Date): Promise<TUserDetail> {
  return loadUserDetail(em, deps.registry.ownedResources, user, now);
}

/** Refuses to hand out what the caller does not hold themselves (an admin cannot grant `billing:write`). */
function assertCanGrant(actor: Actor, before: Iterable<Permission>, after: Iterable<Permission>): void {
  const had = new Set(before);
  const missing = [...after].filter((p) => !had.has(p) && !actor.permissions.has(p));
  if (missing.length > 0) {
    throw forbidden(
      `You cannot grant permissions you do not hold: ${missing.join(', ')}`,
      missing.map((p) => ({ path: 'permissions', message: `not held by the caller: ${p}` })),
    );
  }
}

/**
 * The rules (docs/users-and-permissions.md) for acting on another user: owner/admin (or a holder of `users:write`) manage
 * members; only the owner manages admins; nobody manages the owner here.
 */
function assertMayManage(actor: Actor, target: User): void {
  if (target.role === 'owner') throw forbidden('The organization owner cannot be changed or removed here');
  if (target.role === 'admin' && actor.role !== 'owner') throw forbidden('Only the owner can manage admins');
}

function assertMayGiveRole(actor: Actor, from: Role, to: Role): void {
  if (from === to) return;
  if (to === 'owner') throw forbidden('An organization has one owner; ownership cannot be given here');
  if ((to === 'admin' || from === 'admin') && actor.role !== 'owner') {
    throw forbidden('Only the owner can grant or revoke the admin role');
  }
}

export async function listUsers(ctx: ActorContext, input: TListUsersInput) {
  const { actor } = ctx;
  const counted: Record<string, string> = { organization: actor.organizationId };
  if (input.role) counted.role = input.role;
  if (input.status) counted.status = input.status;
  const request = pageRequest(input);
  const page = await repositoryOf(ctx.deps, 'users').listUsers(ctx.em, counted, request);
  return {
    success: true as const,
    users: page.items.map(toUserSummaryDto),
    ...pageFields(request, page),
  };
}

export async function getUser(ctx: ActorContext, id: string) {
  const { actor } = ctx;
  const user = await findVisibleUserOrThrow(repositoryOf(ctx.deps, 'users'), ctx.em, actor, id);
  return { success: true as const, user: await userDetail(ctx.deps, ctx.em, user, ctx.deps.clock.now()) };
}

function invitationUrl(ctx: { deps: AppDeps }, token: string): string {
  return `${ctx.deps.config.publicBaseUrl}/accept-invitation?token=${encodeURIComponent(token)}`;
}

function newInvitation(
  repository: UsersRepository,
  tx: Em,
  user: User,
  invitedBy: string,
  now: Date,
): string {
  const token = randomToken('uit_', 256);
  repository.createInvitation(tx, {
    id: newId('usr').replace(/^usr_/, 'uinv_'),
    user,
    invitedById: invitedBy,
    tokenHash: sha256Hex(token),
    expiresAt: new Date(now.getTime() + INVITATION_TTL_MS),
  });
  return token;
}

export async function createUser(ctx: ActorContext, input: TCreateUserInput) {
  const { actor } = ctx;
  const now = ctx.deps.clock.now();
  assertMayGiveRole(actor, 'member', input.role);
  const permissions = initialPermissions(input.role, input.permissions);
  assertCanGrant(actor, [], permissions);

  const repository = repositoryOf(ctx.deps, 'users');
  const { user, token, detail } = await repository.transaction(ctx.em, async (em) => {
    // Only this organization's users are looked at: whether the address is known elsewhere is never told (the
    // answer is the same either way); accepting then says so to whoever holds the mailed token.
    if ((await repository.countWithEmail(em, actor.organizationId, input.email)) > 0) {
      throw conflict(
        'A user with this email already exists in this organization: find them with GET /v1/users',
      );
    }
    const u = repository.createUser(em, {
      id: newId('usr'),
      organizationId: actor.organizationId,
      email: input.email,
      name: input.name ?? input.email.split('@')[0]!,
      passwordHash: null,
      role: input.role,
      status: 'invited',
      permissions,
    });
    const t = newInvitation(repository, em, u, actor.userId, now);
    const d = toUserDetailDto(u, { vpn_connections: 0, databases_created: 0, api_calls_30d: 0 });
    repository.recordEvent(em, userCreated, d, actor.organizationId, now);
    return { user: u, token: t, detail: d };
  });

  const url = invitationUrl(ctx, token);
  if (input.send_invitation) await sendInvitation(ctx, actor, user, url);
  return { success: true as const, user: detail, invitation_url: input.send_invitation ? null : url };
}

/** After commit, outside any transaction: the user exists whether or not the mail goes out. */
async function sendInvitation(ctx: ActorContext, actor: Actor, user: User, url: string): Promise<void> {
  const repository = repositoryOf(ctx.deps, 'users');
  const org = await repository.organizationById(ctx.em, actor.organizationId);
  const inviter = await repository.userById(ctx.em, actor.userId);
  const orgName = org?.name ?? 'an organization';
  try {
    await ctx.deps.mail.send({
      kind: 'invitation',
      link: url,
      to: user.email,
      subject: `You are invited to join ${orgName}`,
      text:
        `${inviter?.name ?? 'An administrator'} invited you to join ${orgName} as ${user.role}.\n\n` +
        `Choose a password to activate your account: ${url}\n\n` +
        `The link works once and expires in 7 days.\n`,
    });
  } catch (err) {
    ctx.deps.log.error({ err, userId: user.id }, 'could not send the invitation mail');
  }
}

export async function updateUser(ctx: ActorContext, input: TUpdateUserInput) {
  const { actor } = ctx;
  const now = ctx.deps.clock.now();
  const privileged =
    input.role !== undefined || input.permissions !== undefined || input.status !== undefined;

  const repository = repositoryOf(ctx.deps, 'users');
  const user = await repository.transaction(ctx.em, async (em) => {
    const target = await findVisibleUserOrThrow(repository, em, actor, input.id, true);
    const self = target.id === actor.userId;
    if (self && privileged) {
      throw forbidden(
        'You can change your own name and profile only; role, permissions and status are managed by an admin',
      );
    }
    if (!self) {
      if (!actor.permissions.has('users:write'))
        throw forbidden('This action requires the users:write permission');
      assertMayManage(actor, target);
    }

    let changed = false;
    if (input.name !== undefined && input.name !== target.name) {
      target.name = input.name;
      changed = true;
    }
    if (input.profile) {
      const p = input.profile;
      if (p.avatar_url !== undefined && p.avatar_url !== target.avatarUrl) {
        target.avatarUrl = p.avatar_url;
        changed = true;
      }
      if (p.timezone !== undefined && p.timezone !== target.timezone) {
        target.timezone = p.timezone;
        changed = true;
      }
      if (p.language !== undefined && p.language !== target.language) {
        target.language = p.language;
        changed = true;
      }
    }
    if (input.role !== undefined || input.permissions !== undefined) {
      const role = input.role ?? target.role;
      assertMayGiveRole(actor, target.role, role);
      const before = normalizePermissions(target.permissions);
      const after =
        input.permissions !== undefined
          ? normalizePermissions(input.permissions)
          : role !== target.role
            ? initialPermissions(role)
            : before;
      assertCanGrant(actor, before, after);
      if (role !== target.role || after.join() !== before.join()) {
        target.role = role;
        target.permissions = after;
        changed = true;
      }
    }
    if (input.status !== undefined && input.status !== target.status) {
      if (target.status === 'invited') {
        throw conflict('The user has not accepted the invitation yet');
      }
      target.status = input.status;
      if (input.status === 'suspended') {
        await repository.revokeSessions(em, target.id, now);
        await repository.revokeApiKeys(em, target.id, now);
      }
      changed = true;
    }

    if (changed) {
      await repository.flush(em);
      repository.recordEvent(
        em,
        userUpdated,
        await userDetail(ctx.deps, em, target, now),
        actor.organizationId,
        now,
      );
    }
    return target;
  });
  return { success: true as const, user: await userDetail(ctx.deps, ctx.em, user, now) };
}

export async function deleteUser(ctx: ActorContext, id: string) {
  const { actor } = ctx;
  const now = ctx.deps.clock.now();
  const repository = repositoryOf(ctx.deps, 'users');
  const removed = await repository.transaction(ctx.em, async (em) => {
    const target = await findVisibleUserOrThrow(repository, em, actor, id, true);
    if (target.id === actor.userId) throw forbidden('You cannot delete yourself');
    assertMayManage(actor, target);
    await ctx.deps.registry.ownedResources.transfer(em, {
      organizationId: actor.organizationId,
      fromUserId: target.id,
      toUserId: actor.userId,
    });
    await repository.revokeSessions(em, target.id, now);
    await repository.revokeApiKeys(em, target.id, now);
    await repository.revokeInvitationsOf(em, target.id, now);
    const dto = toUserSummaryDto(target);
    target.deletedAt = now;
    repository.recordEvent(em, userDeleted, dto, actor.organizationId, now);
    return dto;
  });
  return {
    success: true as const,
    message: 'User deleted; their resources were transferred to you',
    id: removed.id,
    email: removed.email,
    resources_transferred_to: actor.userId,
  };
}

export async function getPermissions(ctx: ActorContext, id: string) {
  const { actor } = ctx;
  const user = await findVisibleUserOrThrow(repositoryOf(ctx.deps, 'users'), ctx.em, actor, id);
  return {
    success: true as const,
    user_id: user.id,
    permissions: toPermissionObject(effectivePermissions(user.role, user.permissions)),
  };
}

export async function updatePermissions(ctx: ActorContext, input: TUpdatePermissionsInput) {
  const { actor } = ctx;
  const now = ctx.deps.clock.now();
  const repository = repositoryOf(ctx.deps, 'users');
  const user = await repository.transaction(ctx.em, async (em) => {
    const target = await findVisibleUserOrThrow(repository, em, actor, input.id, true);
    if (target.id === actor.userId) throw forbidden('You cannot change your own permissions');
    assertMayManage(actor, target);
    const before = normalizePermissions(target.permissions);
    const after = applyPermissionObject(before, input.permissions);
    assertCanGrant(actor, before, after);
    if (after.join() !== before.join()) {
      target.permissions = after;
      await repository.flush(em);
      repository.recordEvent(
        em,
        userUpdated,
        await userDetail(ctx.deps, em, target, now),
        actor.organizationId,
        now,
      );
    }
    return target;
  });
  return {
    success: true as const,
    user_id: user.id,
    permissions: toPermissionObject(effectivePermissions(user.role, user.permissions)),
  };
}

export async function acceptInvitation(ctx: RequestContext, input: TAcceptInvitationInput) {
  const now = ctx.deps.clock.now();
  const tokenHash = sha256Hex(input.token);
  const repository = repositoryOf(ctx.deps, 'users');
  const invitation = await repository.findInvitation(ctx.em, tokenHash);
  const valid = (inv: UserInvitation | null): inv is UserInvitation =>
    !!inv &&
    !inv.acceptedAt &&
    !inv.revokedAt &&
    inv.expiresAt > now &&
    !inv.user.deletedAt &&
    inv.user.status === 'invited';
  if (!valid(invitation)) throw INVALID_INVITATION();

  // bcrypt runs before the transaction: never hold one open across it.
  const passwordHash = await ctx.deps.passwords.hash(input.password);
  const activate = repository.transaction(ctx.em, async (em) => {
    // One sign-in account per address (docs/users-and-permissions.md, "Invitations"): the invitation stays pending.
    const elsewhere = await repository.countSignInAccounts(em, invitation.user.email, invitation.user.id);
    if (elsewhere > 0) throw ACCOUNT_ELSEWHERE();
    // Claim the token atomically: of two concurrent uses exactly one wins.
    const claimed = await repository.claimInvitation(em, invitation.id, now);
    const activated =
      claimed === 1 && (await repository.activateInvitedUser(em, invitation.user.id, passwordHash)) === 1;
    if (!activated) throw INVALID_INVITATION();
    const u = await repository.reloadUser(em, invitation.user.id);
    noteAuditActor({ type: 'user', id: u.id, email: u.email, organizationId: u.organization.id });
    repository.recordEvent(em, userUpdated, await userDetail(ctx.deps, em, u, now), u.organization.id, now);
    return u;
  });
  // Two invitations of one address accepted at the same moment: the unique index lets one through.
  const user = await activate.catch((err: unknown) => {
    throw isUniqueViolation(err) ? ACCOUNT_ELSEWHERE() : err;
  });
  return {
    success: true as const,
    message: 'Invitation accepted: the account is active, sign in with POST /auth/login',
    user: toUserSummaryDto(user),
  };
}
