import type { Actor } from '../../../server/access/actor.js';
import { Organization } from '../../../server/access/organization.entity.js';
import { User } from '../../../server/access/user.entity.js';
import type { Em } from '../../../server/db/orm.js';
import type { Paged } from '../../../server/db/pagination.js';
import type { PageRequest } from '../../../server/lib/pagination.js';
import { ApiKey } from '../../../server/modules/api-keys/api-key.entity.js';
import type { ApiKeysRepository, NewApiKey } from '../../../server/modules/api-keys/api-keys.repository.js';
import { NO_EM, newestFirst, reference, row } from '../../support/in-memory.js';

/**
 * The api-keys repository (server/modules/api-keys/api-keys.repository.ts) over an array, for unit tests of the
 * service: no database, no server; held to the MikroORM repository by ./api-keys.repository-contract.ts. Rows are
 * entity instances; a transaction runs its work as it is.
 */
export class InMemoryApiKeysRepository implements ApiKeysRepository {
  readonly keys: ApiKey[] = [];
  /** Organizations whose row a transaction locked (the create's serialisation). */
  readonly locked: string[] = [];

  transaction<R>(_em: Em, work: (tx: Em) => Promise<R>): Promise<R> {
    return work(NO_EM);
  }

  findLiveKey(_em: Em, actor: Actor, id: string): Promise<ApiKey | null> {
    const key = this.keys.find(
      (k) => k.id === id && k.organization.id === actor.organizationId && k.revokedAt === null,
    );
    return Promise.resolve(key ?? null);
  }

  lockOrganization(_tx: Em, organizationId: string): Promise<void> {
    this.locked.push(organizationId);
    return Promise.resolve();
  }

  countLiveKeys(_tx: Em, actor: Actor): Promise<number> {
    return Promise.resolve(this.live(actor.organizationId).length);
  }

  createKey(_tx: Em, k: NewApiKey): ApiKey {
    const key = row(ApiKey, {
      id: k.id,
      organization: reference(Organization, k.organizationId),
      createdBy: reference(User, k.createdById),
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
    this.keys.push(key);
    return key;
  }

  listLiveKeys(_em: Em, actor: Actor, q: PageRequest): Promise<Paged<ApiKey>> {
    const sorted = this.live(actor.organizationId).sort(newestFirst);
    let start = (q.page - 1) * q.limit;
    if (q.startingAfter) start = sorted.findIndex((r) => r.id === q.startingAfter) + 1;
    return Promise.resolve({
      items: sorted.slice(start, start + q.limit),
      total: sorted.length,
      hasMore: start + q.limit < sorted.length,
    });
  }

  revokeKey(_em: Em, id: string, now: Date): Promise<boolean> {
    const key = this.keys.find((k) => k.id === id && k.revokedAt === null);
    if (!key) return Promise.resolve(false);
    key.revokedAt = now;
    key.updatedAt = now;
    return Promise.resolve(true);
  }

  private live(organizationId: string): ApiKey[] {
    return this.keys.filter((k) => k.organization.id === organizationId && k.revokedAt === null);
  }
}
