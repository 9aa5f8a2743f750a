// Test tier: db
import { purgeExpiredSessionsJob } from '../../server/modules/auth/auth.jobs.js';
import { expect } from 'chai';
import { startServices, stopServices } from '../../server/services.js';
import { testConfig, usingPostgres } from '../support/env.js';

describe(`services lifecycle (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(60_000);

  it('stops the job queue with a job just sent, closes the database, and a second stop waits for the same one', async () => {
    const deps = await startServices(testConfig(), {
      pgliteDataDir: usingPostgres ? undefined : 'memory://',
    });
    const id = await deps.jobs.send(purgeExpiredSessionsJob, {});
    deps.jobs.notify('auth.purge-expired-sessions');

    const first = stopServices(deps);
    const second = stopServices(deps);
    expect(second).to.equal(first);
    await first;

    expect(await deps.db.orm.isConnected()).to.equal(false);
    if (deps.db.pglite) expect(deps.db.pglite.closed).to.equal(true);
    // The queue no longer takes jobs once stopped.
    const err = await deps.jobs.send(purgeExpiredSessionsJob, {}).catch((e: Error) => e);
    expect(err).to.be.instanceOf(Error);
    expect(id).to.be.a('string');
  });
});
