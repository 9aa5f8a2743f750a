// Test tier: unit
import { expect } from 'chai';
import type { Actor } from '../../../server/access/actor.js';
import type { ActorContext, AppDeps, Logger, ServiceContext } from '../../../server/kit/deps.js';
import { AppError } from '../../../server/lib/errors.js';
import { createBackup, listBackups } from '../../../server/modules/databases/backups.service.js';
import type { DatabaseDriver } from '../../../server/modules/databases/databases.driver.js';
import {
  completeBackup,
  finishTransition,
  removeDatabase,
  sweepDatabases,
} from '../../../server/modules/databases/databases-lifecycle.service.js';
import type { BackupJobData, TransitionJobData } from '../../../server/modules/databases/databases.jobs.js';
import {
  cancelDeletion,
  createDatabase,
  deleteDatabase,
  getDatabase,
  listDatabases,
  resetPassword,
  updateDatabase,
} from '../../../server/modules/databases/databases.service.js';
import { SimulatedDatabaseDriver } from '../../../server/modules/databases/simulated-databases.driver.js';
import { sha256Hex } from '../../../server/lib/crypto.js';
import { FakeClock } from '../../support/fake-clock.js';
import { InMemoryDatabasesRepository } from './in-memory-databases.repository.js';

/**
 * The databases services and jobs (server/modules/databases/*.service.ts, databases.jobs.ts) against the in-memory
 * repository and the simulated driver: no server, no database, a fake clock. The HTTP tests beside these check the
 * same use cases through the API on PGlite and PostgreSQL.
 */

const DELAY_MS = 2_000;
const GRACE_MS = 24 * 3_600_000;
const silent: Logger = new Proxy({} as Logger, { get: () => () => {} });

function setup(driver: DatabaseDriver = new SimulatedDatabaseDriver(DELAY_MS)) {
  const repo = new InMemoryDatabasesRepository();
  const clock = new FakeClock('2026-11-21T08:00:00.000Z');
  const deps = {
    clock,
    log: silent,
    config: {
      provisioningDelayMs: DELAY_MS,
      databases: { deletionGraceMs: GRACE_MS, backupIntervalMs: 24 * 3_600_000, hosts: null },
    },
    jobs: repo.queue,
    modules: { databases: { driver, repository: repo } },
  } as unknown as AppDeps;
  /** What a job runs with: the deps and a unit of work of its own. */
  const jobContext: ServiceContext = { deps, em: repo.fork() };
  const actorOf = (role: Actor['role'], userId = 'usr_owner'): ActorContext =>
    ({
      deps,
      em: repo.fork(),
      requestId: 'req_unit',
      ip: '127.0.0.1',
      userAgent: undefined,
      actor: {
        userId,
        organizationId: 'org_unit',
        role,
        plan: 'enterprise',
        sessionId: 'ses_unit',
        email: 'u@x',
      },
    }) as unknown as ActorContext;
  const owner = actorOf('owner');
  /** Runs the readiness jobs queued so far, as the queue would once they are due. */
  const runReady = async () => {
    for (const data of repo.take<TransitionJobData>('databases.ready'))
      await finishTransition(jobContext, data);
  };
  const runBackups = async () => {
    for (const data of repo.take<BackupJobData>('databases.complete-backup'))
      await completeBackup(jobContext, { backup_id: data.backup_id });
  };
  return { repo, clock, deps, jobContext, owner, actorOf, runReady, runBackups };
}

async function refused(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('it was not refused');
}

describe('Databases services (unit: in-memory repository, simulated driver)', () => {
  it('create: `creating` with the password once and only its hash kept; the ready job makes it `running`', async () => {
    const { repo, owner, runReady, clock } = setup();
    const res = await createDatabase(owner, { name: 'shop', engine: 'postgresql', backup_enabled: false });
    const d = res.database;
    expect(d.status).to.equal('creating');
    expect(d.connection_info.password).to.match(/^[A-Za-z0-9]{32}$/);
    expect(d.connection_info.simulated).to.equal(true);
    const stored = repo.databases.get(d.id)!;
    expect(stored.passwordHash).to.equal(sha256Hex(d.connection_info.password!));
    expect(JSON.stringify(stored)).to.not.contain(d.connection_info.password);
    expect(repo.events.map((e) => e.type)).to.deep.equal(['database.created']);
    expect(repo.jobs).to.deep.include({
      name: 'databases.ready',
      data: { database_id: d.id, generation: 1 },
      delayMs: DELAY_MS,
    });
    expect(repo.periods).to.have.length(1);

    clock.advance(DELAY_MS);
    await runReady();
    const view = await getDatabase(owner, { id: d.id });
    expect(view.database.status).to.equal('running');
    expect(view.database.connection_string).to.contain('****');
  });

  it('create: a taken name is 409, the plan limit 402, and neither leaves a row, an event or a job', async () => {
    const { repo, owner } = setup();
    await createDatabase(owner, { name: 'a', engine: 'mysql' });
    await createDatabase(owner, { name: 'b', engine: 'mysql' });
    const before = { rows: repo.databases.size, events: repo.events.length, jobs: repo.jobs.length };
    const taken = await refused(createDatabase(owner, { name: 'a', engine: 'mysql' }));
    expect([taken.code, taken.details]).to.deep.equal([
      'CONFLICT',
      [{ path: 'name', message: 'Already in use' }],
    ]);
    // Starter allows 2 databases (lib/plans.ts).
    repo.plans.set('org_unit', 'starter');
    const full = await refused(createDatabase(owner, { name: 'c', engine: 'mysql' }));
    expect(full.code).to.equal('PLAN_LIMIT_EXCEEDED');
    expect(full.details).to.deep.equal([{ resource: 'databases', limit: 2, current: 2 }]);
    expect({ rows: repo.databases.size, events: repo.events.length, jobs: repo.jobs.length }).to.deep.equal(
      before,
    );
  });

  it('resize: only while running; `resizing` then `running` at the new size, billed per size', async () => {
    const { repo, owner, runReady } = setup();
    const { database } = await createDatabase(owner, {
      name: 'r',
      engine: 'postgresql',
      backup_enabled: false,
    });
    const early = await refused(updateDatabase(owner, { id: database.id, size: 'large' }));
    expect(early.code).to.equal('CONFLICT');
    await runReady();
    const res = await updateDatabase(owner, { id: database.id, size: 'large' });
    expect(res.database.status).to.equal('resizing');
    expect(res.database.size).to.equal('large');
    expect(repo.periods.map((p) => [p.size, p.endedAt === null])).to.deep.equal([
      ['small', false],
      ['large', true],
    ]);
    await runReady();
    expect((await getDatabase(owner, { id: database.id })).database.status).to.equal('running');
    expect(repo.events.filter((e) => e.type === 'database.updated')).to.have.length(1);
    // Nothing changed: no event.
    await updateDatabase(owner, { id: database.id, size: 'large' });
    expect(repo.events.filter((e) => e.type === 'database.updated')).to.have.length(1);
  });

  it('backups: a manual one is `pending`, then `completed` with a size (database.backup.completed); only while running', async () => {
    const { repo, owner, runReady, runBackups } = setup();
    const { database } = await createDatabase(owner, { name: 'b', engine: 'mysql', backup_enabled: false });
    expect((await refused(createBackup(owner, { id: database.id }))).code).to.equal('CONFLICT');
    await runReady();
    const { backup } = await createBackup(owner, { id: database.id, name: 'before-upgrade' });
    expect(backup.status).to.equal('pending');
    await runBackups();
    const list = await listBackups(owner, { id: database.id, page: 1, limit: 20 });
    expect(list.backups.map((b) => [b.name, b.status])).to.deep.equal([['before-upgrade', 'completed']]);
    expect(list.backups[0]!.size_bytes).to.be.a('number');
    expect(repo.events.map((e) => e.type)).to.include('database.backup.completed');
  });

  it('restore: a new database from a completed backup names it; another engine is 409, an unknown backup 400', async () => {
    const { owner, runReady, runBackups } = setup();
    const { database } = await createDatabase(owner, {
      name: 'src',
      engine: 'postgresql',
      backup_enabled: false,
    });
    await runReady();
    const { backup } = await createBackup(owner, { id: database.id });
    const pending = await refused(
      createDatabase(owner, { name: 'c0', engine: 'postgresql', backup_id: backup.id }),
    );
    expect(pending.code).to.equal('CONFLICT');
    await runBackups();
    const copy = await createDatabase(owner, { name: 'c1', engine: 'postgresql', backup_id: backup.id });
    expect(copy.database.restored_from_backup_id).to.equal(backup.id);
    const engine = await refused(
      createDatabase(owner, { name: 'c2', engine: 'mysql', backup_id: backup.id }),
    );
    expect(engine.code).to.equal('CONFLICT');
    const unknown = await refused(
      createDatabase(owner, { name: 'c3', engine: 'postgresql', backup_id: 'backup_nope' }),
    );
    expect(unknown.code).to.equal('VALIDATION_ERROR');
  });

  it('delete: `deleting` with a final backup; cancel keeps everything; after the grace the removal takes it away', async () => {
    const { repo, owner, clock, runReady, jobContext } = setup();
    const { database } = await createDatabase(owner, {
      name: 'd',
      engine: 'postgresql',
      backup_enabled: false,
    });
    await runReady();
    const del = await deleteDatabase(owner, { id: database.id });
    expect(repo.backups.get(del.final_backup)!.type).to.equal('final');
    expect(new Date(del.deletion_scheduled).getTime() - clock.now().getTime()).to.equal(GRACE_MS);
    expect((await refused(deleteDatabase(owner, { id: database.id }))).code).to.equal('CONFLICT');

    const kept = await cancelDeletion(owner, { id: database.id });
    expect(kept.database.status).to.equal('running');
    expect(repo.backups.get(del.final_backup)!.expiresAt).to.equal(null);
    // The removal job of the canceled deletion finds a newer generation and does nothing.
    const [removal] = repo.take<TransitionJobData>('databases.remove');
    expect(await removeDatabase(jobContext, removal!)).to.equal(false);

    const again = await deleteDatabase(owner, { id: database.id });
    clock.advance(GRACE_MS);
    const swept = await sweepDatabases(jobContext);
    expect(swept.removedDatabases).to.equal(1);
    expect((await refused(getDatabase(owner, { id: database.id }))).code).to.equal('NOT_FOUND');
    expect(repo.backups.get(again.final_backup)!.status).to.equal('completed');
    expect(repo.databases.get(database.id)!.removedAt).to.be.instanceOf(Date);
  });

  it('reset-password: a new password, its hash stored; refused while deleting; a driver that fails is 503, unchanged', async () => {
    const failing = new SimulatedDatabaseDriver(DELAY_MS);
    let down = false;
    failing.setPassword = async () => {
      if (down) throw new Error('connect ECONNREFUSED');
    };
    const { repo, owner, runReady } = setup(failing);
    const { database } = await createDatabase(owner, {
      name: 'p',
      engine: 'postgresql',
      backup_enabled: false,
    });
    await runReady();
    const res = await resetPassword(owner, { id: database.id });
    expect(res.password).to.not.equal(database.connection_info.password);
    expect(repo.databases.get(database.id)!.passwordHash).to.equal(sha256Hex(res.password));
    down = true;
    const unavailable = await refused(resetPassword(owner, { id: database.id }));
    expect(unavailable.code).to.equal('SERVICE_UNAVAILABLE');
    expect(repo.databases.get(database.id)!.passwordHash).to.equal(sha256Hex(res.password));
    await deleteDatabase(owner, { id: database.id });
    expect((await refused(resetPassword(owner, { id: database.id }))).code).to.equal('CONFLICT');
  });

  it('scope: a member sees and changes only their own databases; another organization sees none', async () => {
    const { owner, actorOf } = setup();
    const { database } = await createDatabase(owner, { name: 'mine', engine: 'postgresql' });
    const member = actorOf('member', 'usr_member');
    expect((await refused(getDatabase(member, { id: database.id }))).code).to.equal('NOT_FOUND');
    expect((await listDatabases(member, { page: 1, limit: 20 })).databases).to.have.length(0);
    const own = await createDatabase(member, { name: 'theirs', engine: 'mysql' });
    expect((await listDatabases(owner, { page: 1, limit: 20 })).databases.map((d) => d.name)).to.have.members(
      ['mine', 'theirs'],
    );
    expect((await getDatabase(member, { id: own.database.id })).database.name).to.equal('theirs');
  });
});
