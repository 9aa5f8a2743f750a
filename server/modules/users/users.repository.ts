import { MikroOrmRepository } from '../../kit/repository.js';
import { LockMode } from '@mikro-orm/core';
import { revokeApiKeysOf } from '../../access/actor.js';
import { Organization } from '../../access/organization.entity.js';
import { LoginSession } from '../../access/session.entity.js';
import {
  createUserEntity,
  ROLES,
  signInAccountOf,
  User,
  USER_STATUSES,
  type NewUserData,
} from '../../access/user.entity.js';
import type { ListCountSpec } from '../../db/list-counts.js';
import type { Em } from '../../db/orm.js';
import { findPage, type Paged } from '../../db/pagination.js';
import type { EventDefinition } from '../../events/define-event.js';
import type { PageRequest } from '../../lib/pagination.js';
import { UserInvitation, UserInvitationSchema } from './user-invitation.entity.js';

/**
 * Every read and write of the users module (docs/adding-a-module.md, "Checklist", step 3): the service and the manifest
 * go through a {@link UsersRepository}, never through the ORM or SQL themselves. The process gets the MikroORM one
 * ({@link MikroOrmUsersRepository}) from the module's `create` (`repositoryOf(deps, 'users')`).
 *
 * A unit of work is an `Em` to the caller: opaque, handed back to the repository. Rows are the entities; a change to a
 * row read in a transaction is written when the transaction commits (or at {@link UsersRepository.flush}).
 */

/** The module's tables, from its entities (the manifest and the SQL below name them from here). */
export const USERS_TABLES = {
  invitations: UserInvitationSchema.tableName,
} as const;

const T = USERS_TABLES;

/** The user list's maintained counts (migration 30, list_counts). */
const USER_COUNTS: ListCountSpec = {
  list: 'users',
  scope: 'organization',
  dims: [
    { key: 'role', values: ROLES },
    { key: 'status', values: USER_STATUSES },
  ],
};

/** What a new invitation row holds. */
export interface NewInvitation {
  id: string;
  user: User;
  invitedById: string;
  tokenHash: string;
  expiresAt: Date;
}

/** What a new (invited) user row holds; the organization is named by its id. */
export type NewUser = Omit<NewUserData, 'organization'> & { organizationId: string };

export interface UsersRepository {
  // ---------- units of work ----------
  /** Runs `work` in a transaction of `em` (committed when it returns, rolled back when it throws). */
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;
  /** Writes the changes made to the rows read in `tx` now (before the transaction commits). */
  flush(tx: Em): Promise<void>;
  /** Records `event` in the outbox of `tx` (server/events/record-event.ts). */
  recordEvent<P>(tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, now: Date): void;

  // ---------- users ----------
  /** A user of the organization that is not deleted; `lock` takes a row lock (inside a transaction). */
  findUser(em: Em, organizationId: string, id: string, lock?: boolean): Promise<User | null>;
  /** The user `id`, whatever its state (the name of an inviter); null when there is none. */
  userById(em: Em, id: string): Promise<User | null>;
  /** The user `id` as committed now (re-read from the database). */
  reloadUser(tx: Em, id: string): Promise<User>;
  /** The organization `id`; null when there is none. */
  organizationById(em: Em, id: string): Promise<Organization | null>;
  /** A page of the organization's users that are not deleted, counted from the list's maintained counts. */
  /** `filter`: the organization, and the role and status asked for (the dimensions of the list's counts). */
  listUsers(em: Em, filter: Record<string, string>, page: PageRequest): Promise<Paged<User>>;
  /** How many users that are not deleted the organization has with `email`. */
  countWithEmail(tx: Em, organizationId: string, email: string): Promise<number>;
  /** How many sign-in accounts of `email` there are other than the user `exceptUserId`. */
  countSignInAccounts(tx: Em, email: string, exceptUserId: string): Promise<number>;
  createUser(tx: Em, user: NewUser): User;
  /** Sets the password of the invited user `id` and activates them; 1 when it did, 0 when they are not invited. */
  activateInvitedUser(tx: Em, id: string, passwordHash: string): Promise<number>;
  /** Ends the user's open sign-in sessions. */
  revokeSessions(tx: Em, userId: string, now: Date): Promise<void>;
  /** Revokes the API keys the user created. */
  revokeApiKeys(tx: Em, userId: string, now: Date): Promise<void>;

  // ---------- invitations ----------
  createInvitation(tx: Em, invitation: NewInvitation): UserInvitation;
  /** The invitation with the token of `tokenHash`, with its user; null when there is none. */
  findInvitation(em: Em, tokenHash: string): Promise<UserInvitation | null>;
  /** Marks the invitation accepted when it is still pending at `now`; 1 when this call claimed it, else 0. */
  claimInvitation(tx: Em, id: string, now: Date): Promise<number>;
  /** Revokes the user's pending invitations. */
  revokeInvitationsOf(tx: Em, userId: string, now: Date): Promise<void>;
}

export class MikroOrmUsersRepository extends MikroOrmRepository implements UsersRepository {
  findUser(em: Em, organizationId: string, id: string, lock = false): Promise<User | null> {
    return em.findOne(
      User,
      { id, organization: organizationId, deletedAt: null },
      lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
    );
  }

  userById(em: Em, id: string): Promise<User | null> {
    return em.findOne(User, id);
  }

  reloadUser(tx: Em, id: string): Promise<User> {
    return tx.findOneOrFail(User, id, { refresh: true });
  }

  organizationById(em: Em, id: string): Promise<Organization | null> {
    return em.findOne(Organization, id);
  }

  listUsers(em: Em, filter: Record<string, string>, page: PageRequest): Promise<Paged<User>> {
    return findPage(em, User, { ...filter, deletedAt: null }, page, {
      counted: { spec: USER_COUNTS, filter },
    });
  }

  countWithEmail(tx: Em, organizationId: string, email: string): Promise<number> {
    return tx.count(User, { email, organization: organizationId, deletedAt: null });
  }

  countSignInAccounts(tx: Em, email: string, exceptUserId: string): Promise<number> {
    return tx.count(User, { ...signInAccountOf(email), id: { $ne: exceptUserId } });
  }

  createUser(tx: Em, user: NewUser): User {
    const { organizationId, ...data } = user;
    return createUserEntity(tx, {
      ...data,
      organization: tx.getReference(Organization, organizationId),
    });
  }

  activateInvitedUser(tx: Em, id: string, passwordHash: string): Promise<number> {
    return tx.nativeUpdate(
      User,
      { id, status: 'invited', deletedAt: null },
      { passwordHash, status: 'active' },
    );
  }

  async revokeSessions(tx: Em, userId: string, now: Date): Promise<void> {
    await tx.nativeUpdate(LoginSession, { user: userId, revokedAt: null }, { revokedAt: now });
  }

  revokeApiKeys(tx: Em, userId: string, now: Date): Promise<void> {
    return revokeApiKeysOf(tx, userId, now);
  }

  createInvitation(tx: Em, invitation: NewInvitation): UserInvitation {
    return tx.create(UserInvitation, {
      id: invitation.id,
      organization: invitation.user.organization,
      user: invitation.user,
      invitedById: invitation.invitedById,
      tokenHash: invitation.tokenHash,
      expiresAt: invitation.expiresAt,
      acceptedAt: null,
      revokedAt: null,
    });
  }

  findInvitation(em: Em, tokenHash: string): Promise<UserInvitation | null> {
    return em.findOne(UserInvitation, { tokenHash }, { populate: ['user'] });
  }

  claimInvitation(tx: Em, id: string, now: Date): Promise<number> {
    return tx.nativeUpdate(
      UserInvitation,
      { id, acceptedAt: null, revokedAt: null, expiresAt: { $gt: now } },
      { acceptedAt: now },
    );
  }

  async revokeInvitationsOf(tx: Em, userId: string, now: Date): Promise<void> {
    await tx.nativeUpdate(
      UserInvitation,
      { user: userId, acceptedAt: null, revokedAt: null },
      { revokedAt: now },
    );
  }
}

/** The manifest's hook: a pending invitation of a deleted organization can no longer be accepted. */
export async function revokeOrganizationInvitations(
  tx: Em,
  organizationId: string,
  now: Date,
): Promise<void> {
  await tx.execute(
    `update "${T.invitations}" set "revoked_at" = ? where "organization_id" = ? and "accepted_at" is null and "revoked_at" is null`,
    [now, organizationId],
  );
}
