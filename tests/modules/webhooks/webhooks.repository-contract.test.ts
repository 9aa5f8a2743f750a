// Test tier: db
import { MikroOrmWebhooksRepository } from '../../../server/modules/webhooks/webhooks.repository.js';
import { usingPostgres } from '../../support/env.js';
import { contractDatabase, databaseWorld, memoryWorld } from '../../support/repository-contract.js';
import { InMemoryWebhooksRepository } from './in-memory-webhooks.repository.js';
import { describeWebhooksRepositoryContract } from './webhooks.repository-contract.js';

/** The webhooks repository's contract (./webhooks.repository-contract.ts), held by the MikroORM repository and the fake. */
describe('webhooks repositories', function () {
  this.timeout(60_000);
  const db = contractDatabase();

  describeWebhooksRepositoryContract(`MikroORM (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => ({
    repo: new MikroOrmWebhooksRepository(db.deps.db),
    world: databaseWorld(db.deps),
  }));

  describeWebhooksRepositoryContract('in memory', async () => ({
    repo: new InMemoryWebhooksRepository(),
    world: memoryWorld(),
  }));
});
