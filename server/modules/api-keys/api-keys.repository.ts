import { repositoryOf } from '../../kit/runtime.js';
import { LockMode } from '@mikro-orm/core';
import type { Actor } from '../../access/actor.js';
import { Organization } from '../../access/organization.entity.js';
import { inOrganization } from '../../access/scope.js';
import { User } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import { findPage, type Paged } from '../../db/pagination.js';
import type { AppDeps } from '../../kit/deps.js';
import type { OrganizationRows } from '../../kit/module.js';
import type { PageRequest } from '../../lib/pagination.js';
import { ApiKey, ApiKeySchema } from './api-key.entity.js';

/**
 * Every read and write of the api-keys module (docs/adding-a-module.md, "Checklist", step 3): the service goes through
 * an {@link ApiKeysRepository}, never through the ORM or SQL itself. The process gets the MikroORM one
 * ({@link MikroOrmApiKeysRepository}) from the module's `create` (`repositoryOf(deps, 'apiKeys')`).
 *
 * A key is authenticated on every request by the access core's prepared query (server/access/actor.ts), and its
 * `last_used_at` written with the usage counters (server/limits/api-usage.ts): that hot path is not here.
 */

/** The module's tables, from its entities (the manifest's lists name them from here). */
export const API_KEYS_TABLES = {
  keys: ApiKeySchema.tableName,
} as const;

const T = API_KEYS_TABLES;

/** What a new key row holds. */
export interface NewApiKey {
  id: string;
  organizationId: string;
  createdById: string;
  now: Date;
  name: string;
  prefix: string;
  secretHash: string;
  permissions: string[];
  expiresAt: Date;
}

export interface ApiKeysRepository {
  /** Runs `work` in a transaction of `em` (committed when it returns, rolled back when it throws). */
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;
  /** A live (not revoked) key `id` of the actor's organization, or null. */
  findLiveKey(em: Em, actor: Actor, id: string): Promise<ApiKey | null>;
  /** Locks the organization's row (`tx`): creates of one organization run one after the other. */
  lockOrganization(tx: Em, organizationId: string): Promise<void>;
  /** Live keys of the actor's organization. */
  countLiveKeys(tx: Em, actor: Actor): Promise<number>;
  createKey(tx: Em, key: NewApiKey): ApiKey;
  /** One page of the organization's live keys, newest first (the total from the list's maintained counts). */
  listLiveKeys(em: Em, actor: Actor, page: PageRequest): Promise<Paged<ApiKey>>;
  /** Revokes the key `id` if it is still live; false when it was not. */
  revokeKey(em: Em, id: string, now: Date): Promise<boolean>;
}

/** The module's data access, as the module's `create` built it for this process. */
export function apiKeysRepositoryOf(deps: AppDeps): ApiKeysRepository {
  return repositoryOf(deps, 'apiKeys');
}

/** What deleting an organization removes of the module's tables (the manifest's `organizationRows`). */
export const API_KEYS_ORGANIZATION_ROWS: OrganizationRows = { remove: [{ table: T.keys }] };

// ---------- the MikroORM implementation ----------

/** On the request's unit of work: it needs no connection of its own. */
export class MikroOrmApiKeysRepository implements ApiKeysRepository {
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R> {
    return em.transactional(work);
  }

  findLiveKey(em: Em, actor: Actor, id: string): Promise<ApiKey | null> {
    return em.findOne(ApiKey, { id, ...inOrganization(actor), revokedAt: null });
  }

  async lockOrganization(tx: Em, organizationId: string): Promise<void> {
    await tx.findOneOrFail(Organization, organizationId, { lockMode: LockMode.PESSIMISTIC_WRITE });
  }

  countLiveKeys(tx: Em, actor: Actor): Promise<number> {
    return tx.count(ApiKey, { ...inOrganization(actor), revokedAt: null });
  }

  createKey(tx: Em, k: NewApiKey): ApiKey {
    return tx.create(ApiKey, {
      id: k.id,
      organization: tx.getReference(Organization, k.organizationId),
      createdBy: tx.getReference(User, k.createdById),
      name: k.name,
      prefix: k.prefix,
      secretHash: k.secretHash,
      permissions: k.permissions,
      expiresAt: k.expiresAt,
      lastUsedAt: null,
      revokedAt: null,
      createdAt: k.now,
      updatedAt: k.now,
    });
  }

  listLiveKeys(em: Em, actor: Actor, page: PageRequest): Promise<Paged<ApiKey>> {
    const scope = inOrganization(actor);
    return findPage(em, ApiKey, { ...scope, revokedAt: null }, page, {
      counted: { spec: { list: T.keys, scope: 'organization', dims: [] }, filter: scope },
    });
  }

  async revokeKey(em: Em, id: string, now: Date): Promise<boolean> {
    const n = await em.nativeUpdate(ApiKey, { id, revokedAt: null }, { revokedAt: now, updatedAt: now });
    return n !== 0;
  }
}
