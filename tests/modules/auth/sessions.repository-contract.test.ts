// Test tier: db
import { User } from '../../../server/access/user.entity.js';
import { MikroOrmAuthRepository } from '../../../server/modules/auth/auth.repository.js';
import { usingPostgres } from '../../support/env.js';
import { NO_EM, reference } from '../../support/in-memory.js';
import { contractDatabase, databaseWorld, memoryWorld } from '../../support/repository-contract.js';
import { InMemorySessionsRepository } from './in-memory-sessions.repository.js';
import { describeSessionsRepositoryContract } from './sessions.repository-contract.js';

/** The login sessions' contract (./sessions.repository-contract.ts), held by the MikroORM auth repository and the fake. */
describe('login session repositories', function () {
  this.timeout(60_000);
  const db = contractDatabase();

  describeSessionsRepositoryContract(`MikroORM (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => ({
    repo: new MikroOrmAuthRepository(db.deps.db),
    em: () => db.deps.db.orm.em.fork(),
    flush: (em) => em.flush(),
    user: (em, id) => em.getReference(User, id),
    world: databaseWorld(db.deps),
  }));

  describeSessionsRepositoryContract('in memory', async () => ({
    repo: new InMemorySessionsRepository(),
    em: () => NO_EM,
    flush: async () => {},
    user: (_em, id) => reference(User, id),
    world: memoryWorld(),
  }));
});
