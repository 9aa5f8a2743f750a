import { expect } from 'chai';
import type { Role } from '../../../server/access/user.entity.js';
import { newId } from '../../../server/lib/ids.js';
import type { OrganizationRepository } from '../../../server/modules/organization/organization.repository.js';

/** What the organization contract runs against: a repository, and how to add the rows it reads. */
export interface OrganizationContractSubject {
  repo: OrganizationRepository;
  /** Adds an organization (deleted at `deletedAt` if given). */
  organization(o: { id: string; name: string; deletedAt?: Date }): Promise<void>;
  /** Adds a user of the organization. */
  user(u: {
    id: string;
    organizationId: string;
    role: Role;
    createdAt: Date;
    deletedAt?: Date;
  }): Promise<void>;
}

const T0 = Date.parse('2026-11-01T00:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);

/**
 * The behaviour of an {@link OrganizationRepository} the organization service and its removal job rely on
 * (docs/organization.md, "The organization"), run against the MikroORM repository on the test database and the
 * in-memory one of the unit tests (tests/modules/organization/organization.repository-contract.test.ts).
 */
export function describeOrganizationRepositoryContract(
  label: string,
  make: () => Promise<OrganizationContractSubject>,
): void {
  describe(`OrganizationRepository contract: ${label}`, () => {
    let s: OrganizationContractSubject;
    beforeEach(async () => {
      s = await make();
    });

    it('finds an organization until it is marked deleted, and says which are', async () => {
      const live = newId('org');
      const deleted = newId('org');
      await s.organization({ id: live, name: 'Live' });
      await s.organization({ id: deleted, name: 'Deleted', deletedAt: at(1) });
      const em = s.repo.fork();

      expect(await s.repo.findOrganization(em, live)).to.include({ id: live, name: 'Live', deletedAt: null });
      expect(await s.repo.findOrganization(em, deleted)).to.equal(null);
      expect(await s.repo.isDeleted(em, live)).to.equal(false);
      expect(await s.repo.isDeleted(em, deleted)).to.equal(true);
      expect(await s.repo.isDeleted(em, newId('org'))).to.equal(null);
      const ids = await s.repo.deletedOrganizationIds(em);
      expect(ids).to.include(deleted);
      expect(ids).not.to.include(live);
    });

    it('counts the users not deleted and names the first owner; finds a user only in its organization', async () => {
      const a = newId('org');
      const b = newId('org');
      await s.organization({ id: a, name: 'A' });
      await s.organization({ id: b, name: 'B' });
      const [first, second, member, gone, theirs] = ['usr', 'usr', 'usr', 'usr', 'usr'].map(() =>
        newId('usr'),
      );
      await s.user({ id: second!, organizationId: a, role: 'owner', createdAt: at(2) });
      await s.user({ id: first!, organizationId: a, role: 'owner', createdAt: at(1) });
      await s.user({ id: member!, organizationId: a, role: 'member', createdAt: at(3) });
      await s.user({ id: gone!, organizationId: a, role: 'owner', createdAt: at(0), deletedAt: at(4) });
      await s.user({ id: theirs!, organizationId: b, role: 'owner', createdAt: at(0) });
      const em = s.repo.fork();

      expect(await s.repo.people(em, a)).to.deep.equal({ ownerId: first, usersCount: 3 });
      expect(await s.repo.people(em, newId('org'))).to.deep.equal({ ownerId: null, usersCount: 0 });
      expect(await s.repo.findUser(em, a, member!)).to.include({ id: member, role: 'member' });
      expect(await s.repo.findUser(em, b, member!)).to.equal(null);
      expect(await s.repo.findUser(em, a, gone!)).to.equal(null);
    });

    it('writes the changes to an organization read in a transaction', async () => {
      const id = newId('org');
      await s.organization({ id, name: 'Before' });
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        const org = await s.repo.findOrganization(tx, id, true);
        org!.name = 'After';
        await s.repo.flush(tx);
      });
      expect(await s.repo.findOrganization(s.repo.fork(), id)).to.include({ name: 'After' });
    });
  });
}
