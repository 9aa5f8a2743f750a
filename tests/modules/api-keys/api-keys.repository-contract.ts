import { expect } from 'chai';
import type { Em } from '../../../server/db/orm.js';
import { sha256Hex } from '../../../server/lib/crypto.js';
import { newId } from '../../../server/lib/ids.js';
import type { PageRequest } from '../../../server/lib/pagination.js';
import type { ApiKeysRepository } from '../../../server/modules/api-keys/api-keys.repository.js';
import type { ContractWorld } from '../../support/repository-contract.js';
import { actorOf } from '../../support/unit.js';

/** What the api-keys contract runs against: a repository, a unit of work to hand it, and the rows it refers to. */
export interface ApiKeysContractSubject {
  repo: ApiKeysRepository;
  /** A fresh unit of work (the repository has none of its own: it works on the request's). */
  em(): Em;
  world: ContractWorld;
}

const T0 = Date.parse('2026-11-01T00:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);

/**
 * The behaviour of an {@link ApiKeysRepository} the api-keys service relies on (docs/api-keys.md, "API keys"), run
 * against the MikroORM repository on the test database and the in-memory one of the unit tests
 * (tests/modules/api-keys/api-keys.repository-contract.test.ts).
 */
export function describeApiKeysRepositoryContract(
  label: string,
  make: () => Promise<ApiKeysContractSubject>,
): void {
  describe(`ApiKeysRepository contract: ${label}`, () => {
    let s: ApiKeysContractSubject;
    beforeEach(async () => {
      s = await make();
    });

    async function key(organizationId: string, userId: string, seconds: number): Promise<string> {
      const id = newId('key');
      await s.repo.transaction(s.em(), async (tx) => {
        await s.repo.lockOrganization(tx, organizationId);
        s.repo.createKey(tx, {
          id,
          organizationId,
          createdById: userId,
          now: at(seconds),
          name: `key ${seconds}`,
          prefix: id.slice(4, 12),
          secretHash: sha256Hex(id),
          permissions: ['vpn:read'],
          expiresAt: at(86_400),
        });
      });
      return id;
    }

    it("finds, counts and lists an organization's live keys (newest first, by page and cursor), not another's", async () => {
      const a = await s.world.organization();
      const member = await s.world.user(a.organizationId, 'member');
      const b = await s.world.organization();
      const k1 = await key(a.organizationId, a.userId, 1);
      const k2 = await key(a.organizationId, member, 2);
      const k3 = await key(a.organizationId, a.userId, 3);
      await key(b.organizationId, b.userId, 4);
      const owner = actorOf(a.organizationId, a.userId, 'owner');
      const other = actorOf(b.organizationId, b.userId, 'owner');
      const list = (page: PageRequest) => s.repo.listLiveKeys(s.em(), owner, page);
      const ids = (p: { items: { id: string }[] }) => p.items.map((k) => k.id);

      const found = await s.repo.findLiveKey(s.em(), actorOf(a.organizationId, member, 'member'), k1);
      expect(found).to.include({ id: k1, name: 'key 1', revokedAt: null, lastUsedAt: null });
      expect(found!.createdBy.id).to.equal(a.userId);
      expect(found!.permissions).to.deep.equal(['vpn:read']);
      expect(await s.repo.findLiveKey(s.em(), other, k1)).to.equal(null);
      expect(await s.repo.transaction(s.em(), (tx) => s.repo.countLiveKeys(tx, owner))).to.equal(3);
      const all = await list({ page: 1, limit: 10 });
      expect(ids(all)).to.deep.equal([k3, k2, k1]);
      expect(all).to.include({ total: 3, hasMore: false });
      const first = await list({ page: 1, limit: 2 });
      expect(first).to.include({ total: 3, hasMore: true });
      expect(ids(await list({ page: 2, limit: 2 }))).to.deep.equal([k1]);
      expect(ids(await list({ page: 1, limit: 5, startingAfter: k3 }))).to.deep.equal([k2, k1]);
    });

    it('revokes a live key once: it is then neither found, nor counted, nor listed', async () => {
      const a = await s.world.organization();
      const k1 = await key(a.organizationId, a.userId, 1);
      const k2 = await key(a.organizationId, a.userId, 2);
      const owner = actorOf(a.organizationId, a.userId, 'owner');

      expect(await s.repo.revokeKey(s.em(), k1, at(5))).to.equal(true);
      expect(await s.repo.revokeKey(s.em(), k1, at(6))).to.equal(false);
      expect(await s.repo.findLiveKey(s.em(), owner, k1)).to.equal(null);
      expect(await s.repo.transaction(s.em(), (tx) => s.repo.countLiveKeys(tx, owner))).to.equal(1);
      const page = await s.repo.listLiveKeys(s.em(), owner, { page: 1, limit: 10 });
      expect(page.items.map((k) => k.id)).to.deep.equal([k2]);
      expect(page.total).to.equal(1);
    });
  });
}
