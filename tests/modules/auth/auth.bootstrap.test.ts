// Test tier: db
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { startServices, stopServices } from '../../../server/services.js';
import { createCallerFactory } from '../../../server/trpc/init.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import { createInProcessContext } from '../../../server/trpc/context.js';
import { appRouter } from '../../../server/router.js';
import { testConfig } from '../../support/env.js';
import { uniqueEmail, signedIn } from '../../support/factories.js';

const createCaller = createCallerFactory(appRouter);

/**
 * Restarts on the same data: the same PGlite directory, or the same PostgreSQL database when DATABASE_URL is set.
 * No JWT_SECRET, so the secret is generated into DATA_DIR on the first start.
 */
describe('start-up: OWNER_* bootstrap and the generated JWT secret (docs/configuration.md, "Configuration")', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'boot-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const start = (env: Record<string, string | undefined>) => {
    const config = testConfig({ DATA_DIR: dir, JWT_SECRET: undefined, ...env });
    return startServices(config, { startJobs: false });
  };
  const owners = async (deps: AppDeps, email: string) =>
    deps.db.orm.em
      .fork()
      .execute<{ id: string; role: string; organization_id: string }[]>(
        'select id, role, organization_id from users where email = ?',
        [email],
      );

  it('creates the owner once, keeps the secret across restarts, tokens survive a restart, usage is flushed at stop', async () => {
    const email = uniqueEmail('boot');
    const env = {
      OWNER_EMAIL: email.toUpperCase(),
      OWNER_PASSWORD: 'first-owner-password',
      OWNER_NAME: 'Olga Owner',
      ORGANIZATION_NAME: 'Boot Org',
    };

    const first = await start(env);
    let token: string;
    let secret: string;
    try {
      const rows = await owners(first, email);
      expect(rows).to.have.length(1);
      expect(rows[0]!.role).to.equal('owner');
      const [org] = await first.db.orm.em
        .fork()
        .execute<{ name: string; plan: string }[]>('select name, plan from organizations where id = ?', [
          rows[0]!.organization_id,
        ]);
      expect(org).to.deep.equal({ name: 'Boot Org', plan: 'starter' });
      const login = signedIn(
        await createCaller(createInProcessContext(first)).auth.login({
          email,
          password: 'first-owner-password',
        }),
      );
      expect(login.user).to.include({ name: 'Olga Owner', role: 'owner' });
      token = login.token;
      // An API call counted in memory is written at shutdown.
      await createCaller(createInProcessContext(first, { token })).auth.me();
      secret = readFileSync(join(dir, 'jwt-secret'), 'utf8').trim();
      expect(Buffer.byteLength(secret)).to.be.at.least(32);
      expect(statSync(join(dir, 'jwt-secret')).mode & 0o777).to.equal(0o600);
    } finally {
      await stopServices(first);
    }

    // Second start with the same email (and another password): nothing new is created, nothing is changed.
    const second = await start({ ...env, OWNER_PASSWORD: 'another-password' });
    try {
      const rows = await owners(second, email);
      expect(rows).to.have.length(1);
      const calls = await second.db.orm.em
        .fork()
        .execute<{ count: number }[]>('select "count" from api_calls_daily where organization_id = ?', [
          rows[0]!.organization_id,
        ]);
      expect(calls.map((c) => Number(c.count))).to.deep.equal([1]);
      expect(readFileSync(join(dir, 'jwt-secret'), 'utf8').trim()).to.equal(secret);
      const me = await createCaller(createInProcessContext(second, { token })).auth.me();
      expect(me.user.email).to.equal(email);
      const again = signedIn(
        await createCaller(createInProcessContext(second)).auth.login({
          email,
          password: 'first-owner-password',
        }),
      );
      expect(again.user.role).to.equal('owner');
    } finally {
      await stopServices(second);
    }
  });
});
