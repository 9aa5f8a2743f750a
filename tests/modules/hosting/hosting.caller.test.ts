// Test tier: server
import { expect } from 'chai';
import { HostingSite } from '../../../server/modules/hosting/hosting-site.entity.js';
import { humanBytes, trafficBetween } from '../../../server/modules/hosting/hosting.simulation.js';
import { toAppError } from '../../../server/trpc/init.js';
import { createOrg } from '../../support/factories.js';
import { FakeClock } from '../../support/fake-clock.js';
import { testConfig } from '../../support/env.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { ownPostgresDatabase } from '../../support/scratch-database.js';
import { waitFor } from '../../support/wait.js';
import { GIT_REPO } from './hosting-helpers.js';

const rejection = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => toAppError(e),
  );

/** In process (the procedures as tRPC and the SDK call them), on a server whose clock only moves when told. */
describe('Hosting in process', () => {
  let s: TestServer;
  let db: Awaited<ReturnType<typeof ownPostgresDatabase>>;
  const clock = new FakeClock('2026-11-21T08:00:00.000Z');
  before(async () => {
    // Its builds must run on its own clock: no other server may take its jobs.
    db = await ownPostgresDatabase('hosting_clock');
    s = await startTestServer({ clock, config: testConfig(db ? { DATABASE_URL: db.url } : {}) });
  });
  after(async () => {
    await s?.close();
    await db?.drop();
  });

  it('creates, deploys and serves a site; its metrics follow the simulation exactly', async () => {
    const owner = await createOrg(s.deps);
    const c = s.caller(owner.token);
    const { site } = await c.hosting.sites.create({
      name: 'Clocked',
      git_repo: GIT_REPO,
      framework: 'angular',
    });
    expect(site.build_settings).to.deep.equal({
      build_command: 'ng build --prod',
      output_directory: 'dist',
      node_version: '22',
    });
    const { deployment } = await c.hosting.sites.deploy({ id: site.id, commit: 'deadbeef' });
    expect(deployment).to.include({ status: 'queued', commit: 'deadbeef', site_id: site.id });
    const done = await waitFor('the deployment to succeed', async () => {
      const { deployment: d } = await c.hosting.deployments.get({
        id: site.id,
        deployment_id: deployment.id,
      });
      return d.status === 'success' ? d : undefined;
    });
    // Every step ran at the same (frozen) instant.
    expect(done).to.include({
      started_at: '2026-11-21T08:00:00.000Z',
      completed_at: '2026-11-21T08:00:00.000Z',
      duration: '0s',
    });
    const logs = await c.hosting.deployments.logs({ id: site.id, deployment_id: deployment.id });
    expect(logs.status).to.equal('success');
    expect(logs.logs.every((l) => l.timestamp === '2026-11-21T08:00:00.000Z')).to.equal(true);

    // (Less than the access token's hour.)
    clock.advance(50 * 60_000);
    const { site: later } = await c.hosting.sites.get({ id: site.id });
    const served = trafficBetween(
      site.id,
      { from: new Date(clock.now().getTime() - 86_400_000), to: clock.now() },
      { liveSince: new Date('2026-11-21T08:00:00.000Z') },
    );
    expect(served.requests).to.be.greaterThan(0);
    expect(later.metrics).to.deep.include({
      requests_24h: served.requests,
      bandwidth_24h: humanBytes(served.bytes),
    });
    expect(later.last_deployment).to.equal('2026-11-21T08:00:00.000Z');
  });

  it('reports the API error codes: 404, 409, 402, 400', async () => {
    const owner = await createOrg(s.deps);
    const c = s.caller(owner.token);
    expect((await rejection(c.hosting.sites.get({ id: 'site_nope000000000000000' })))?.code).to.equal(
      'NOT_FOUND',
    );
    const { site } = await c.hosting.sites.create({
      name: 'x',
      git_repo: GIT_REPO,
      framework: 'vue',
      domain: `x${Date.now()}.example.net`,
    });
    // Verified, as a found TXT record makes it (docs/sites.md, "Custom domains"): then it is the site's alone.
    await s.deps.db.orm.em
      .fork()
      .nativeUpdate(HostingSite, { id: site.id }, { domainVerifiedAt: new Date() });
    const dup = await rejection(
      c.hosting.sites.create({ name: 'y', git_repo: GIT_REPO, framework: 'vue', domain: site.domain! }),
    );
    expect(dup?.code).to.equal('CONFLICT');
    for (let i = 0; i < 4; i++)
      await c.hosting.sites.create({ name: `f${i}`, git_repo: GIT_REPO, framework: 'vue' });
    const limit = await rejection(
      c.hosting.sites.create({ name: 'z', git_repo: GIT_REPO, framework: 'vue' }),
    );
    expect(limit?.code).to.equal('PLAN_LIMIT_EXCEEDED');
    expect(limit?.details).to.deep.equal([{ resource: 'hosting_sites', limit: 5, current: 5 }]);
    const bad = await rejection(
      c.hosting.sites.update({ id: site.id, environment_variables: { 'not-valid': '1' } }),
    );
    expect(bad?.code).to.equal('VALIDATION_ERROR');
    expect(bad?.details).to.deep.equal([
      {
        path: 'environment_variables.not-valid',
        message: 'names are upper-case letters, digits and `_`, not starting with a digit',
      },
    ]);
  });
});
