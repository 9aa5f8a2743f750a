import { LockMode } from '@mikro-orm/core';
import { revokeApiKeysOf } from '../../access/actor.js';
import { Organization } from '../../access/organization.entity.js';
import { signInAccountOf, User, type UserStatus } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import type { EventDefinition } from '../../events/define-event.js';
import type { AppDeps } from '../../kit/deps.js';
import { MikroOrmRepository } from '../../kit/repository.js';
import { runtimeOf } from '../../kit/runtime.js';
import { ScimToken, ScimTokenSchema, ScimUser, ScimUserSchema } from './scim.entity.js';

/**
 * Every read and write of SCIM provisioning (docs/sso.md, "SCIM provisioning"): the organization's token, and the
 * organization's users as the directory sees them. Like the module's other repositories, the unit of work comes
 * first on every method; the process gets the MikroORM one from the auth module's `create` (`scimRepositoryOf`).
 */

/** The tables of SCIM provisioning, from their entities. */
export const SCIM_TABLES = {
  tokens: ScimTokenSchema.tableName,
  users: ScimUserSchema.tableName,
} as const;

/** What deleting an organization removes of SCIM's tables (part of the manifest's `organizationRows`). */
export const SCIM_ORGANIZATION_ROWS = [{ table: SCIM_TABLES.users }, { table: SCIM_TABLES.tokens }] as const;

/** A list's conditions, all of which a user meets (`and`); absent ones do not filter. */
export interface ScimUserFilter {
  /** A user id; an id of no user matches nothing. */
  id?: string;
  /** Lower-cased. */
  email?: string;
  externalId?: string;
  /** The statuses that match (`active eq true`: active and invited; `false`: suspended). */
  statuses?: readonly UserStatus[];
}

/** What the directory says of a user beyond the row. */
export interface ScimUserFields {
  externalId: string | null;
  givenName: string | null;
  familyName: string | null;
}

export interface ScimRepository {
  // ---------- units of work ----------
  fork(): Em;
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;
  flush(em: Em): Promise<void>;
  recordEvent<P>(tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, now: Date): void;

  // ---------- the token ----------
  /** The token of `tokenHash`, with its organization (plan, deletion); null when none has it. */
  findToken(em: Em, tokenHash: string): Promise<ScimToken | null>;
  /** Makes `tokenHash` the organization's one token (the previous one is gone). */
  replaceToken(
    tx: Em,
    t: { organizationId: string; tokenHash: string; createdBy: string; now: Date },
  ): Promise<void>;

  // ---------- users ----------
  /** A page of the organization's users that are not deleted, oldest first, and how many match. */
  listUsers(
    em: Em,
    organizationId: string,
    filter: ScimUserFilter,
    offset: number,
    limit: number,
  ): Promise<{ users: User[]; total: number }>;
  /** A user of the organization that is not deleted; `lock` takes a row lock (`tx`). */
  findUser(em: Em, organizationId: string, id: string, lock?: boolean): Promise<User | null>;
  /** The organization's owner. */
  ownerOf(em: Em, organizationId: string): Promise<User | null>;
  /** The SCIM rows of `userIds`, by user id. */
  fieldsOf(em: Em, userIds: readonly string[]): Promise<Map<string, ScimUser>>;
  /** Writes what the directory says of the user (a row made or changed). */
  saveFields(tx: Em, user: User, fields: ScimUserFields, now: Date): Promise<void>;
  /** Forgets what the directory said of the user (the user is removed). */
  deleteFields(tx: Em, userId: string): Promise<void>;
  /** Whether the organization has a user of `email` that is not deleted (invited ones included). */
  emailInOrganization(tx: Em, organizationId: string, email: string): Promise<boolean>;
  /** Whether `email` is the sign-in account of a user of another organization. */
  accountElsewhere(tx: Em, organizationId: string, email: string): Promise<boolean>;
  /** Revokes the API keys the user created. */
  revokeApiKeys(tx: Em, userId: string, now: Date): Promise<void>;
  /** The organization, locked in share mode (a plan change waits for the change). */
  lockOrganizationShared(tx: Em, id: string): Promise<Organization | null>;
}

export function scimRepositoryOf(deps: AppDeps): ScimRepository {
  return runtimeOf(deps, 'auth').scim;
}

export class MikroOrmScimRepository extends MikroOrmRepository implements ScimRepository {
  findToken(em: Em, tokenHash: string): Promise<ScimToken | null> {
    return em.findOne(ScimToken, { tokenHash }, { populate: ['organization'] });
  }

  async replaceToken(
    tx: Em,
    t: { organizationId: string; tokenHash: string; createdBy: string; now: Date },
  ): Promise<void> {
    await tx.nativeDelete(ScimToken, { organization: t.organizationId });
    await tx.insert(ScimToken, {
      organization: t.organizationId,
      tokenHash: t.tokenHash,
      createdBy: t.createdBy,
      createdAt: t.now,
    });
  }

  async listUsers(
    em: Em,
    organizationId: string,
    filter: ScimUserFilter,
    offset: number,
    limit: number,
  ): Promise<{ users: User[]; total: number }> {
    const where: Record<string, unknown> = { organization: organizationId, deletedAt: null };
    if (filter.id !== undefined) where.id = filter.id;
    if (filter.email !== undefined) where.email = filter.email;
    if (filter.statuses !== undefined) where.status = { $in: filter.statuses };
    if (filter.externalId !== undefined) {
      const rows = await em.find(
        ScimUser,
        { organization: organizationId, externalId: filter.externalId },
        { fields: ['user'] },
      );
      const ids = rows.map((r) => r.user.id);
      where.id = filter.id !== undefined ? (ids.includes(filter.id) ? filter.id : { $in: [] }) : { $in: ids };
    }
    const total = await em.count(User, where);
    const users =
      limit === 0 || offset >= total
        ? []
        : await em.find(User, where, { orderBy: { createdAt: 'asc', id: 'asc' }, offset, limit });
    return { users, total };
  }

  findUser(em: Em, organizationId: string, id: string, lock = false): Promise<User | null> {
    return em.findOne(
      User,
      { id, organization: organizationId, deletedAt: null },
      lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
    );
  }

  ownerOf(em: Em, organizationId: string): Promise<User | null> {
    return em.findOne(User, { organization: organizationId, role: 'owner', deletedAt: null });
  }

  async fieldsOf(em: Em, userIds: readonly string[]): Promise<Map<string, ScimUser>> {
    if (userIds.length === 0) return new Map();
    const rows = await em.find(ScimUser, { user: { $in: [...userIds] } }, { refresh: true });
    return new Map(rows.map((r) => [r.user.id, r]));
  }

  async saveFields(tx: Em, user: User, fields: ScimUserFields, now: Date): Promise<void> {
    await tx.upsert(
      ScimUser,
      {
        user: user.id,
        organization: user.organization.id,
        externalId: fields.externalId,
        givenName: fields.givenName,
        familyName: fields.familyName,
        updatedAt: now,
      },
      { onConflictFields: ['user'] },
    );
  }

  async deleteFields(tx: Em, userId: string): Promise<void> {
    await tx.nativeDelete(ScimUser, { user: userId });
  }

  async emailInOrganization(tx: Em, organizationId: string, email: string): Promise<boolean> {
    return (await tx.count(User, { organization: organizationId, email, deletedAt: null })) > 0;
  }

  async accountElsewhere(tx: Em, organizationId: string, email: string): Promise<boolean> {
    return (await tx.count(User, { ...signInAccountOf(email), organization: { $ne: organizationId } })) > 0;
  }

  revokeApiKeys(tx: Em, userId: string, now: Date): Promise<void> {
    return revokeApiKeysOf(tx, userId, now);
  }

  lockOrganizationShared(tx: Em, id: string): Promise<Organization | null> {
    return tx.findOne(Organization, id, { lockMode: LockMode.PESSIMISTIC_READ, refresh: true });
  }
}
