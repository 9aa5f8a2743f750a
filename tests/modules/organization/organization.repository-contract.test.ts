// Test tier: db
import { Organization } from '../../../server/access/organization.entity.js';
import { User } from '../../../server/access/user.entity.js';
import { MikroOrmOrganizationRepository } from '../../../server/modules/organization/organization.repository.js';
import { usingPostgres } from '../../support/env.js';
import { contractDatabase } from '../../support/repository-contract.js';
import { InMemoryOrganizationRepository } from './in-memory-organization.repository.js';
import { describeOrganizationRepositoryContract } from './organization.repository-contract.js';

/** The organization repository's contract (./organization.repository-contract.ts), held by the MikroORM one and the fake. */
describe('organization repositories', function () {
  this.timeout(60_000);
  const db = contractDatabase();

  describeOrganizationRepositoryContract(
    `MikroORM (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`,
    async () => {
      const em = () => db.deps.db.orm.em.fork();
      return {
        repo: new MikroOrmOrganizationRepository(db.deps.db),
        async organization(o) {
          const e = em();
          e.create(Organization, { id: o.id, name: o.name, deletedAt: o.deletedAt ?? null });
          await e.flush();
        },
        async user(u) {
          const e = em();
          e.create(User, {
            id: u.id,
            organization: u.organizationId,
            email: `${u.id}@example.com`,
            name: u.id,
            passwordHash: null,
            role: u.role,
            avatarUrl: null,
            timezone: null,
            language: null,
            lastLogin: null,
            createdAt: u.createdAt,
            updatedAt: u.createdAt,
            deletedAt: u.deletedAt ?? null,
          });
          await e.flush();
        },
      };
    },
  );

  describeOrganizationRepositoryContract('in memory', async () => {
    const repo = new InMemoryOrganizationRepository();
    return {
      repo,
      async organization(o) {
        repo.addOrganization({ ...o, createdAt: new Date() });
      },
      async user(u) {
        repo.addUser(u);
      },
    };
  });
});
