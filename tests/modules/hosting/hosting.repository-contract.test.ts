// Test tier: db
import { MikroOrmHostingRepository } from '../../../server/modules/hosting/hosting.repository.js';
import { usingPostgres } from '../../support/env.js';
import { contractDatabase, databaseWorld, memoryWorld } from '../../support/repository-contract.js';
import { describeHostingRepositoryContract } from './hosting.repository-contract.js';
import { InMemoryHostingRepository } from './in-memory-hosting.repository.js';

/** The hosting repository's contract (./hosting.repository-contract.ts), held by the MikroORM repository and the fake. */
describe('hosting repositories', function () {
  this.timeout(60_000);
  const db = contractDatabase();

  describeHostingRepositoryContract(`MikroORM (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => ({
    repo: new MikroOrmHostingRepository(db.deps.db),
    world: databaseWorld(db.deps),
    deps: db.deps,
  }));

  describeHostingRepositoryContract('in memory', async () => {
    const repo = new InMemoryHostingRepository();
    return { repo, world: memoryWorld((id, plan) => repo.setPlan(id, plan)), deps: db.deps };
  });
});
