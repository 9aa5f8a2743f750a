// Test tier: server
import { expect } from 'chai';
import { serviceContext } from '../../../server/kit/deps.js';
import {
  pruneExpiredBackups,
  sweepDatabases,
} from '../../../server/modules/databases/databases-lifecycle.service.js';
import { databasesSweepJob } from '../../../server/modules/databases/databases.jobs.js';
import { databasesUsageReporter } from '../../../server/modules/databases/databases.usage.js';
import { login } from '../../../server/modules/auth/auth.service.js';
import { createInProcessContext } from '../../../server/trpc/context.js';
import { createOrg, signedIn, type TestUser } from '../../support/factories.js';
import { usingPostgres } from '../../support/env.js';
import { FakeClock } from '../../support/fake-clock.js';
import { http } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import {
  createDatabase,
  dbName,
  eventsOf,
  runningDatabase,
  scratchPostgres,
  sleep,
  storedBackups,
  waitBackupCompleted,
  waitStatus,
} from './databases-helpers.js';
import { waitFor } from '../../support/wait.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;

/**
 * Time-driven behaviour on a server whose clock only moves when told to (the fake clock stamps backups, expiries,
 * deletion dates and usage), with short real intervals for the jobs: BACKUP_INTERVAL 1 s, DATABASE_DELETION_GRACE
 * 5 s.
 */
describe('Databases: automatic backups, expiry, removal and usage (fake clock)', function () {
  this.timeout(90_000);
  let s: TestServer;
  const clock = new FakeClock('2026-11-21T08:00:00.000Z');
  // On PostgreSQL a database of its own: the run's one is shared with the other test servers, whose job workers
  // (on the real clock) would take this server's jobs too.
  let scratch: { url: string; drop: () => Promise<void> } | undefined;
  before(async () => {
    if (usingPostgres) scratch = await scratchPostgres('databases_clock');
    s = await startTestServer({
      clock,
      env: { BACKUP_INTERVAL: '1s', DATABASE_DELETION_GRACE: '5s', DATABASE_URL: scratch?.url },
    });
  });
  after(async () => {
    await s?.close();
    await scratch?.drop();
  });

  /** Moves the clock on, and logs `user` in again (access tokens live one hour of that clock). */
  async function advance(ms: number, user: TestUser): Promise<void> {
    clock.advance(ms);
    const res = signedIn(
      await login(createInProcessContext(s.deps), { email: user.email, password: user.password }),
    );
    user.token = res.token;
  }

  const backupsOf = async (owner: TestUser, id: string, q = '') =>
    (await http(s.baseUrl, 'GET', `/v1/databases/${id}/backups?limit=100${q}`, { token: owner.token })).body;

  it('takes automatic backups every BACKUP_INTERVAL; they expire backup_retention days later and are removed', async () => {
    const owner = await createOrg(s.deps);
    const d = await runningDatabase(s.baseUrl, owner.token, { backup_retention: 2 });
    expect(Date.parse(d.next_backup) - Date.parse(d.created_at)).to.equal(1000);
    const manual = (
      await http(s.baseUrl, 'POST', `/v1/databases/${d.id}/backups`, { token: owner.token, body: {} })
    ).body.backup;

    // Automatic backups appear, completed, each expiring 2 days after its creation; the manual one never does.
    const listed = await waitFor('two automatic backups', async () => {
      const body = await backupsOf(owner, d.id, '&type=automatic&status=completed');
      return body.total >= 2 ? body : undefined;
    });
    for (const b of listed.backups) {
      expect(b).to.include({ type: 'automatic', status: 'completed', database_id: d.id });
      expect(b.name).to.match(new RegExp(`^${d.name}-automatic-\\d{8}-\\d{6}$`));
      expect(Date.parse(b.expires_at) - Date.parse(b.created_at)).to.equal(2 * DAY);
    }
    await waitBackupCompleted(s.baseUrl, owner.token, d.id, manual.id);
    const shown = (await http(s.baseUrl, 'GET', `/v1/databases/${d.id}`, { token: owner.token })).body
      .database;
    expect(shown.last_backup).to.equal(clock.now().toISOString());
    expect(shown.next_backup).to.equal(new Date(clock.now().getTime() + 1000).toISOString());
    const completed = await eventsOf(s.deps, owner.organizationId, 'database.backup.completed');
    expect(completed.length).to.be.at.least(3);
    expect(completed.map((e) => (e.data.object as any).type)).to.include.members(['automatic', 'manual']);

    // A new retention applies to the automatic backups already taken.
    const put = await http(s.baseUrl, 'PUT', `/v1/databases/${d.id}`, {
      token: owner.token,
      body: { backup_retention: 3 },
    });
    expect(put.status).to.equal(200);
    for (const b of (await backupsOf(owner, d.id, '&type=automatic')).backups) {
      expect(Date.parse(b.expires_at) - Date.parse(b.created_at)).to.equal(3 * DAY);
    }

    // Turned off: no new automatic backups.
    const off = await http(s.baseUrl, 'PUT', `/v1/databases/${d.id}`, {
      token: owner.token,
      body: { backup_enabled: false },
    });
    expect(off.body.database.next_backup).to.equal(null);
    await sleep(400);
    const before = (await backupsOf(owner, d.id, '&type=automatic')).total;
    await sleep(2500);
    expect((await backupsOf(owner, d.id, '&type=automatic')).total).to.equal(before);

    // Three days later: every automatic backup has expired; the sweep job removes them, the manual one stays.
    await advance(3 * DAY, owner);
    await s.deps.jobs.send(databasesSweepJob, {});
    await waitFor('no automatic backup left', async () =>
      (await backupsOf(owner, d.id, '&type=automatic')).total === 0 ? true : undefined,
    );
    const left = await backupsOf(owner, d.id);
    expect(left.backups.map((b: any) => b.id)).to.deep.equal([manual.id]);
    expect(await pruneExpiredBackups(serviceContext(s.deps))).to.equal(0);
  });

  it('removes a database at deletion_scheduled: 404, other backups gone, the final one kept 7 days', async () => {
    const owner = await createOrg(s.deps);
    const d = await runningDatabase(s.baseUrl, owner.token, { backup_enabled: false, engine: 'mongodb' });
    const manual = (
      await http(s.baseUrl, 'POST', `/v1/databases/${d.id}/backups`, { token: owner.token, body: {} })
    ).body.backup;
    await waitBackupCompleted(s.baseUrl, owner.token, d.id, manual.id);
    const deletion = await http(s.baseUrl, 'DELETE', `/v1/databases/${d.id}`, { token: owner.token });
    expect(deletion.status).to.equal(202);
    expect(Date.parse(deletion.body.deletion_scheduled) - clock.now().getTime()).to.equal(5000);

    // DATABASE_DELETION_GRACE later (5 s), the removal job runs.
    await waitFor('the database to be gone', async () => {
      const res = await http(s.baseUrl, 'GET', `/v1/databases/${d.id}`, { token: owner.token });
      return res.status === 404 ? true : undefined;
    });
    for (const [method, path] of [
      ['PUT', `/databases/${d.id}`],
      ['DELETE', `/databases/${d.id}`],
      ['GET', `/databases/${d.id}/backups`],
      ['POST', `/databases/${d.id}/backups`],
      ['POST', `/databases/${d.id}/cancel-deletion`],
      ['POST', `/databases/${d.id}/reset-password`],
    ] as const) {
      const res = await http(s.baseUrl, method, `/v1${path}`, {
        token: owner.token,
        body: method === 'GET' || method === 'DELETE' ? undefined : {},
      });
      expect(res.status, `${method} ${path}`).to.equal(404);
    }
    const list = await http(s.baseUrl, 'GET', '/v1/databases', { token: owner.token });
    expect(list.body.total).to.equal(0);

    const stored = await storedBackups(s.deps, d.id);
    expect(stored.map((b) => [b.id, b.type, b.status])).to.deep.equal([
      [deletion.body.final_backup, 'final', 'completed'],
    ]);
    expect(stored[0]!.expiresAt!.getTime()).to.equal(clock.now().getTime() + 7 * DAY);
    expect(await eventsOf(s.deps, owner.organizationId, 'database.deleted')).to.have.length(1);

    // Restorable for 7 days, under the same name.
    await advance(7 * DAY - 1000, owner);
    const restored = await createDatabase(s.baseUrl, owner.token, {
      name: d.name,
      engine: 'mongodb',
      backup_id: deletion.body.final_backup,
    });
    expect(restored.status, restored.text).to.equal(201);
    // Then it expires, and is removed.
    await advance(1000, owner);
    const late = await createDatabase(s.baseUrl, owner.token, {
      engine: 'mongodb',
      backup_id: deletion.body.final_backup,
    });
    expect(late.status).to.equal(400);
    expect(late.body.error.details[0].path).to.equal('backup_id');
    expect(await pruneExpiredBackups(serviceContext(s.deps))).to.be.at.least(1);
    expect(await storedBackups(s.deps, d.id)).to.deep.equal([]);
  });

  it('removes a deletion that is due by the app clock in the sweep, before its job runs', async () => {
    const owner = await createOrg(s.deps);
    const d = await runningDatabase(s.baseUrl, owner.token, { backup_enabled: false });
    await http(s.baseUrl, 'DELETE', `/v1/databases/${d.id}`, { token: owner.token });
    clock.advance(5000);
    const done = await sweepDatabases(serviceContext(s.deps));
    expect(done.removedDatabases).to.be.at.least(1);
    expect((await http(s.baseUrl, 'GET', `/v1/databases/${d.id}`, { token: owner.token })).status).to.equal(
      404,
    );
    // The final backup was still pending: it was completed first.
    const [final] = await storedBackups(s.deps, d.id);
    expect(final).to.include({ type: 'final', status: 'completed' });
    expect(await eventsOf(s.deps, owner.organizationId, 'database.backup.completed')).to.have.length(1);
    // The removal job, when it comes, finds nothing to do.
    await sleep(5500);
    expect(await eventsOf(s.deps, owner.organizationId, 'database.backup.completed')).to.have.length(1);
  });

  describe('usage', () => {
    it('counts what the plan counts, and reports instances, storage, compute hours and prorated add-ons', async () => {
      const owner = await createOrg(s.deps, { plan: 'pro' });
      const t0 = clock.now();
      const period = { start: new Date(t0.getTime() - DAY), end: new Date(t0.getTime() + 30 * DAY) };
      const report = () =>
        databasesUsageReporter.report(s.deps.db.orm.em.fork(), owner.organizationId, period, clock.now());
      const addOns = () =>
        databasesUsageReporter.addOns!(s.deps.db.orm.em.fork(), owner.organizationId, period, clock.now());
      const counted = () =>
        s.deps.registry.usage.current(
          s.deps.db.orm.em.fork(),
          owner.organizationId,
          'databases',
          clock.now(),
        );

      const a = await runningDatabase(s.baseUrl, owner.token, {
        name: dbName('usage-a'),
        backup_enabled: false,
      });
      const b = await runningDatabase(s.baseUrl, owner.token, {
        name: dbName('usage-b'),
        size: 'xl',
        backup_enabled: false,
      });
      expect(await counted()).to.equal(2);
      expect(await report()).to.deep.equal({
        'database.instances': 2,
        'database.storage_gb': 1020,
        'database.compute_hours': 0,
      });

      // One hour at small, then two at medium; b is deleted after three hours, and not billed while deleting.
      await advance(HOUR, owner);
      await http(s.baseUrl, 'PUT', `/v1/databases/${a.id}`, { token: owner.token, body: { size: 'medium' } });
      await waitStatus(s.baseUrl, owner.token, a.id, 'running');
      await advance(2 * HOUR, owner);
      await http(s.baseUrl, 'DELETE', `/v1/databases/${b.id}`, { token: owner.token });
      expect(await counted()).to.equal(1);
      await advance(HOUR, owner);
      // a: 1 h × 1 vCPU + 3 h × 2 vCPU = 7; b: 3 h × 8 vCPU = 24.
      expect(await report()).to.deep.equal({
        'database.instances': 1,
        'database.storage_gb': 100,
        'database.compute_hours': 31,
      });
      const lines = (await addOns()).sort((x, y) => x.description.localeCompare(y.description));
      expect(lines).to.deep.equal(
        [
          {
            resourceId: a.id,
            description: `Database ${a.name} (medium)`,
            monthlyPriceCents: 8900,
            seconds: 3 * 3600,
          },
          {
            resourceId: a.id,
            description: `Database ${a.name} (small)`,
            monthlyPriceCents: 2900,
            seconds: 3600,
          },
          {
            resourceId: b.id,
            description: `Database ${b.name} (xl)`,
            monthlyPriceCents: 49900,
            seconds: 3 * 3600,
          },
        ].sort((x, y) => x.description.localeCompare(y.description)),
      );

      // Canceling the deletion bills it again from then on; the plan counts it again.
      await http(s.baseUrl, 'POST', `/v1/databases/${b.id}/cancel-deletion`, {
        token: owner.token,
        body: {},
      });
      expect(await counted()).to.equal(2);
      await advance(HOUR, owner);
      const after = await report();
      expect(after).to.deep.equal({
        'database.instances': 2,
        'database.storage_gb': 1100,
        'database.compute_hours': 31 + 2 + 8,
      });
      // A period that ended before now counts until its end only; one before the databases existed, nothing.
      const past = { start: new Date(t0.getTime() - 10 * DAY), end: new Date(t0.getTime() - DAY) };
      expect(
        await databasesUsageReporter.report(s.deps.db.orm.em.fork(), owner.organizationId, past, clock.now()),
      ).to.deep.equal({
        'database.instances': 0,
        'database.storage_gb': 0,
        'database.compute_hours': 0,
      });
      const firstHour = { start: t0, end: new Date(t0.getTime() + HOUR) };
      expect(
        await databasesUsageReporter.report(
          s.deps.db.orm.em.fork(),
          owner.organizationId,
          firstHour,
          clock.now(),
        ),
      ).to.deep.equal({ 'database.instances': 2, 'database.storage_gb': 1020, 'database.compute_hours': 9 });
    });
  });
});
