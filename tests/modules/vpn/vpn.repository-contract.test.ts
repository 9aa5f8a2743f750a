// Test tier: db
import { MikroOrmVpnRepository } from '../../../server/modules/vpn/vpn.repository.js';
import { usingPostgres } from '../../support/env.js';
import { contractDatabase, databaseWorld, memoryWorld } from '../../support/repository-contract.js';
import { InMemoryVpnRepository } from './in-memory-vpn.repository.js';
import { describeVpnRepositoryContract } from './vpn.repository-contract.js';

/** The VPN repository's contract (./vpn.repository-contract.ts), held by the MikroORM repository and by the fake. */
describe('VPN repositories', function () {
  this.timeout(60_000);
  const db = contractDatabase();

  describeVpnRepositoryContract(`MikroORM (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => ({
    repo: new MikroOrmVpnRepository(db.deps.db),
    world: databaseWorld(db.deps),
    deps: db.deps,
  }));

  describeVpnRepositoryContract('in memory', async () => {
    const repo = new InMemoryVpnRepository();
    return { repo, world: memoryWorld((id, plan) => repo.setPlan(id, plan)), deps: db.deps };
  });
});
