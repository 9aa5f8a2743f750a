import { Organization } from '../../server/access/organization.entity.js';
import { User, type Role } from '../../server/access/user.entity.js';
import type { AppDeps } from '../../server/kit/deps.js';
import { newId } from '../../server/lib/ids.js';
import type { PlanId } from '../../server/lib/plans.js';
import { startServices, stopServices } from '../../server/services.js';
import { testConfig, usingPostgres } from './env.js';
import { migratedPgliteTemplate } from './pglite-template.js';

/**
 * What the repository contract suites (tests/modules/<m>/<m>.repository-contract.ts) run on: the same checks against
 * a module's MikroORM repository on the test database and against its in-memory repository of the unit tests, so
 * that the fake cannot drift from the real one. A suite reaches the rows it needs outside its module (organizations,
 * users) through a {@link ContractWorld}.
 */

/** Rows a module's tables refer to, made in the store under test. */
export interface ContractWorld {
  /** A new organization on `plan` (starter by default) and its owner. */
  organization(plan?: PlanId): Promise<{ organizationId: string; userId: string }>;
  /** A new user of the organization. */
  user(organizationId: string, role?: Role): Promise<string>;
}

/** The services of a process on the test database (no jobs run), for the file's contract suites; stopped after it. */
export function contractDatabase(): { readonly deps: AppDeps } {
  let deps: AppDeps | undefined;
  before(async function () {
    this.timeout(60_000);
    deps = await startServices(testConfig(), {
      startJobs: false,
      pgliteDataDir: usingPostgres ? undefined : 'memory://',
      pgliteInitialData: usingPostgres ? undefined : await migratedPgliteTemplate(),
    });
  });
  after(async () => {
    if (deps) await stopServices(deps);
  });
  return {
    get deps(): AppDeps {
      if (!deps) throw new Error('the contract database is opened in a before hook');
      return deps;
    },
  };
}

/** Organizations and users as rows of the test database. */
export function databaseWorld(deps: AppDeps): ContractWorld {
  const user = async (organizationId: string, role: Role = 'member') => {
    const em = deps.db.orm.em.fork();
    const id = newId('usr');
    em.create(User, {
      id,
      organization: organizationId,
      email: `${id}@example.com`,
      name: 'Contract User',
      passwordHash: null,
      role,
      avatarUrl: null,
      timezone: null,
      language: null,
      lastLogin: null,
      deletedAt: null,
    });
    await em.flush();
    return id;
  };
  return {
    async organization(plan = 'starter') {
      const em = deps.db.orm.em.fork();
      const organizationId = newId('org');
      em.create(Organization, { id: organizationId, name: 'Contract Org', plan, deletedAt: null });
      await em.flush();
      return { organizationId, userId: await user(organizationId, 'owner') };
    },
    user,
  };
}

/** Organizations and users as ids only (an in-memory repository keeps no such rows); `onPlan` hears of each plan. */
export function memoryWorld(
  onPlan: (organizationId: string, plan: PlanId) => void = () => {},
): ContractWorld {
  return {
    async organization(plan = 'starter') {
      const organizationId = newId('org');
      onPlan(organizationId, plan);
      return { organizationId, userId: newId('usr') };
    },
    async user() {
      return newId('usr');
    },
  };
}
