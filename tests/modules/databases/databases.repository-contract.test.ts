// Test tier: db
import { MikroOrmDatabasesRepository } from '../../../server/modules/databases/databases.repository.js';
import { usingPostgres } from '../../support/env.js';
import { contractDatabase, databaseWorld, memoryWorld } from '../../support/repository-contract.js';
import { describeDatabasesRepositoryContract } from './databases.repository-contract.js';
import { InMemoryDatabasesRepository } from './in-memory-databases.repository.js';

/** The databases repository's contract (./databases.repository-contract.ts), held by the MikroORM repository and the fake. */
describe('databases repositories', function () {
  this.timeout(60_000);
  const db = contractDatabase();

  describeDatabasesRepositoryContract(`MikroORM (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => ({
    repo: new MikroOrmDatabasesRepository(db.deps.db),
    world: databaseWorld(db.deps),
    deps: db.deps,
  }));

  describeDatabasesRepositoryContract('in memory', async () => {
    const repo = new InMemoryDatabasesRepository();
    return { repo, world: memoryWorld((id, plan) => repo.plans.set(id, plan)), deps: db.deps };
  });
});
