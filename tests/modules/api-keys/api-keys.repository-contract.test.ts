// Test tier: db
import { MikroOrmApiKeysRepository } from '../../../server/modules/api-keys/api-keys.repository.js';
import { NO_EM } from '../../support/in-memory.js';
import { usingPostgres } from '../../support/env.js';
import { contractDatabase, databaseWorld, memoryWorld } from '../../support/repository-contract.js';
import { describeApiKeysRepositoryContract } from './api-keys.repository-contract.js';
import { InMemoryApiKeysRepository } from './in-memory-api-keys.repository.js';

/** The api-keys repository's contract (./api-keys.repository-contract.ts), held by the MikroORM repository and the fake. */
describe('api-keys repositories', function () {
  this.timeout(60_000);
  const db = contractDatabase();

  describeApiKeysRepositoryContract(`MikroORM (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => ({
    repo: new MikroOrmApiKeysRepository(),
    em: () => db.deps.db.orm.em.fork(),
    world: databaseWorld(db.deps),
  }));

  describeApiKeysRepositoryContract('in memory', async () => ({
    repo: new InMemoryApiKeysRepository(),
    em: () => NO_EM,
    world: memoryWorld(),
  }));
});
