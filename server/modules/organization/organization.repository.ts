import { MikroOrmRepository } from '../../kit/repository.js';
import { LockMode } from '@mikro-orm/core';
import { Organization, OrganizationSchema } from '../../access/organization.entity.js';
import { LoginSessionSchema } from '../../access/session.entity.js';
import { User, UserSchema } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import type { EventDefinition } from '../../events/define-event.js';

/**
 * Every read and write of the organization module (docs/adding-a-module.md, "Checklist", step 3): the service and the
 * removal job go through an {@link OrganizationRepository}, never through the ORM or SQL themselves. The process gets
 * the MikroORM one ({@link MikroOrmOrganizationRepository}) from the module's `create`
 * (`repositoryOf(deps, 'organization')`).
 *
 * The tables are the core's (the organization, its users and their sessions): this module reads and marks them. A unit
 * of work is an `Em` to the caller: opaque, handed back to the repository (and to the kit's functions that work in
 * the same unit, such as the removal steps and the job queue's `send`).
 */

/** The tables the module reads and writes, from their entities. */
export const ORGANIZATION_TABLES = {
  organizations: OrganizationSchema.tableName,
  users: UserSchema.tableName,
  loginSessions: LoginSessionSchema.tableName,
} as const;

const T = ORGANIZATION_TABLES;

/** The organization's owner and how many users it has (invited, active, suspended; not deleted). */
export interface OrganizationPeople {
  ownerId: string | null;
  usersCount: number;
}

export interface OrganizationRepository {
  // ---------- units of work ----------
  /** A fresh unit of work (the removal job, the resumer). */
  fork(): Em;
  /** Runs `work` in a transaction of `em` (committed when it returns, rolled back when it throws). */
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;
  /** Writes the changes made to the rows read in `tx` now (before the transaction commits). */
  flush(tx: Em): Promise<void>;
  /** Records `event` in the outbox of `tx` (server/events/record-event.ts). */
  recordEvent<P>(tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, now: Date): void;

  // ---------- the organization ----------
  /** The organization `id` unless it is deleted; `lock` takes its row lock (inside a transaction). */
  findOrganization(em: Em, id: string, lock?: boolean): Promise<Organization | null>;
  /** Its owner (the first created, if ever more than one) and its users' count. */
  people(em: Em, organizationId: string): Promise<OrganizationPeople>;
  /** Whether the organization `id` is marked deleted; null when its row is gone. */
  isDeleted(em: Em, id: string): Promise<boolean | null>;
  /** Ids of the organizations marked deleted whose row is still there. */
  deletedOrganizationIds(em: Em): Promise<string[]>;

  // ---------- its users ----------
  /** A user of the organization that is not deleted; `lock` takes its row lock (inside a transaction). */
  findUser(em: Em, organizationId: string, id: string, lock?: boolean): Promise<User | null>;
  /** Ends every open sign-in session of the organization's users. */
  revokeSessions(tx: Em, organizationId: string, now: Date): Promise<void>;
}

export class MikroOrmOrganizationRepository extends MikroOrmRepository implements OrganizationRepository {
  findOrganization(em: Em, id: string, lock = false): Promise<Organization | null> {
    return em.findOne(
      Organization,
      { id, deletedAt: null },
      lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
    );
  }

  async people(em: Em, organizationId: string): Promise<OrganizationPeople> {
    const rows = await em.execute<{ owner_id: string | null; users_count: number }[]>(
      `select (select "id" from "${T.users}" where "organization_id" = ? and "role" = 'owner' and "deleted_at" is null
              order by "created_at" limit 1) as owner_id,
            (select count(*)::int from "${T.users}" where "organization_id" = ? and "deleted_at" is null) as users_count`,
      [organizationId, organizationId],
    );
    return { ownerId: rows[0]?.owner_id ?? null, usersCount: Number(rows[0]?.users_count ?? 0) };
  }

  async isDeleted(em: Em, id: string): Promise<boolean | null> {
    const [row] = await em.execute<{ deleted: boolean }[]>(
      `select ("deleted_at" is not null) as deleted from "${T.organizations}" where "id" = ?`,
      [id],
    );
    return row ? row.deleted : null;
  }

  async deletedOrganizationIds(em: Em): Promise<string[]> {
    const rows = await em.execute<{ id: string }[]>(
      `select "id" from "${T.organizations}" where "deleted_at" is not null`,
    );
    return rows.map((r) => r.id);
  }

  findUser(em: Em, organizationId: string, id: string, lock = false): Promise<User | null> {
    return em.findOne(
      User,
      { id, organization: organizationId, deletedAt: null },
      lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
    );
  }

  async revokeSessions(tx: Em, organizationId: string, now: Date): Promise<void> {
    await tx.execute(
      `update "${T.loginSessions}" set "revoked_at" = ?
        where "revoked_at" is null and "user_id" in (select "id" from "${T.users}" where "organization_id" = ?)`,
      [now, organizationId],
    );
  }
}
