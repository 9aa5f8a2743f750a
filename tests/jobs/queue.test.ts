// Test tier: db
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { openDatabase, type Database } from '../../server/db/orm.js';
import { createJobQueue, jobRef, type JobInfo, type JobQueue } from '../../server/jobs/queue.js';
import { buildRegistry } from '../../server/kit/registry.js';
import { modules } from '../../server/modules.js';
import { usingPostgres } from '../support/env.js';
import { waitFor } from '../support/wait.js';

/** A queue name of its own per test: the PostgreSQL test database is shared with the rest of the run. */
const queueName = (label: string) => `test.${label}.${randomBytes(4).toString('hex')}`;

const quietLog = { error() {}, warn() {} };

const { entities, migrations } = buildRegistry(modules);

function openDb(pgliteDataDir = 'memory://'): Promise<Database> {
  return openDatabase({
    databaseUrl: process.env.DATABASE_URL,
    pgliteDataDir,
    entities: [...entities],
    migrations: [...migrations],
  });
}

/** How long a test waits for the queue: a deadline for a broken queue, not a timing assertion. */
const deadline = { timeoutMs: 20_000 };

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe(`job queue (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(60_000);
  let db: Database;
  let jobs: JobQueue;

  const delayed = queueName('delayed');
  const inTx = queueName('tx');
  const alwaysFails = queueName('always-fails');
  const failsOnce = queueName('fails-once');
  const batch = queueName('batch');
  const runs = new Map<string, { data: any; job: JobInfo; at: number }[]>();
  const record = (name: string) => async (data: any, job: JobInfo) => {
    runs.set(name, [...(runs.get(name) ?? []), { data, job, at: Date.now() }]);
  };
  const runsOf = (name: string) => runs.get(name) ?? [];

  before(async () => {
    db = await openDb();
    jobs = createJobQueue(db, quietLog);
    jobs.define({ name: delayed, handler: record(delayed) });
    jobs.define({ name: inTx, handler: record(inTx) });
    jobs.define({
      name: alwaysFails,
      retryLimit: 2,
      retryDelaySeconds: 0,
      handler: async (data, job) => {
        await record(alwaysFails)(data, job);
        throw new Error('always fails');
      },
    });
    jobs.define<{ key: string }>({
      name: failsOnce,
      retryLimit: 3,
      retryDelaySeconds: 0,
      handler: async (data, job) => {
        await record(failsOnce)(data, job);
        if (job.retryCount === 0) throw new Error('first attempt fails');
      },
    });
    jobs.define<{ n: number; fail: boolean }>({
      name: batch,
      batchSize: 3,
      handler: async (data, job) => {
        await record(batch)(data, job);
        if (data.fail) throw new Error('this one fails');
      },
    });
    await jobs.start();
  });

  after(async () => {
    await jobs?.stop();
    await db?.close();
  });

  it('runs a job sent with delayMs only once the delay has passed', async () => {
    const sentAt = Date.now();
    const id = await jobs.send(jobRef(delayed), { hello: 'later' }, { delayMs: 1500 });
    expect(id).to.be.a('string');
    const stored = await jobs.getJob(delayed, id!);
    expect(stored!.state).to.equal('created');
    expect(stored!.startAfter.getTime()).to.be.at.least(sentAt + 1500);

    const [run] = await waitFor(
      'the delayed job',
      () => runsOf(delayed).length > 0 && runsOf(delayed),
      deadline,
    );
    expect(run!.data).to.deep.equal({ hello: 'later' });
    expect(run!.at).to.be.at.least(sentAt + 1500);
    const done = await waitFor(
      'completion',
      async () => {
        const j = await jobs.getJob(delayed, id!);
        return j?.state === 'completed' && j;
      },
      deadline,
    );
    expect(done.startedOn!.getTime()).to.be.at.least(done.startAfter.getTime());
  });

  it('enqueues inside a transaction: the job exists once it commits and never if it rolls back', async () => {
    const em = db.orm.em.fork();
    let committedId: string | null = null;
    await em.transactional(async (tx) => {
      committedId = await jobs.send(jobRef(inTx), { outcome: 'commit' }, { em: tx });
      await tx.execute('select 1');
      if (usingPostgres) {
        // Another connection (the queue's own) does not see it before the commit. (PGlite has one connection:
        // a query outside the transaction would wait for it to end.)
        expect(await jobs.getJob(inTx, committedId!)).to.equal(null);
      }
    });
    expect(committedId).to.be.a('string');

    let rolledBackId: string | null = null;
    const failure = await em
      .transactional(async (tx) => {
        rolledBackId = await jobs.send(jobRef(inTx), { outcome: 'rollback' }, { em: tx });
        throw new Error('abort the change');
      })
      .catch((err: Error) => err);
    expect(failure).to.be.instanceOf(Error);
    expect(rolledBackId).to.be.a('string');
    expect(await jobs.getJob(inTx, rolledBackId!)).to.equal(null);

    await waitFor('the committed job', () => runsOf(inTx).length > 0, deadline);
    await waitFor(
      'completion',
      async () => (await jobs.getJob(inTx, committedId!))?.state === 'completed',
      deadline,
    );
    expect(runsOf(inTx).map((r) => r.data)).to.deep.equal([{ outcome: 'commit' }]);
  });

  it('retries a failing job retryLimit times, then marks it failed', async () => {
    const id = await jobs.send(jobRef(alwaysFails), { x: 1 });
    const failed = await waitFor(
      'the final failure',
      async () => {
        const j = await jobs.getJob(alwaysFails, id!);
        return j?.state === 'failed' && j;
      },
      deadline,
    );
    expect(failed.retryCount).to.equal(2);
    expect(failed.output).to.deep.include({ message: 'always fails' });
    expect(runsOf(alwaysFails).map((r) => r.job.retryCount)).to.deep.equal([0, 1, 2]);
  });

  it('completes a job whose retry succeeds', async () => {
    const id = await jobs.send(jobRef(failsOnce), { key: 'k' });
    const done = await waitFor(
      'completion',
      async () => {
        const j = await jobs.getJob(failsOnce, id!);
        return j?.state === 'completed' && j;
      },
      deadline,
    );
    expect(done.retryCount).to.equal(1);
    expect(runsOf(failsOnce).map((r) => r.job.retryCount)).to.deep.equal([0, 1]);
  });

  it('fails only the failing job of a batch', async () => {
    // Committed together, so that one poll fetches all three.
    const ids: string[] = [];
    await db.orm.em.fork().transactional(async (tx) => {
      for (const n of [1, 2, 3])
        ids.push((await jobs.send(jobRef(batch), { n, fail: n === 2 }, { em: tx }))!);
    });
    jobs.notify(batch);
    const all = await waitFor(
      'the batch',
      async () => {
        const stored = await Promise.all(ids.map((id) => jobs.getJob(batch, id)));
        return stored.every((j) => j?.state === 'completed' || j?.state === 'failed') && stored;
      },
      deadline,
    );
    expect(all.map((j) => j!.state)).to.deep.equal(['completed', 'failed', 'completed']);
    // One fetch started all three (pg-boss stamps them in one statement).
    expect(new Set(all.map((j) => j!.startedOn!.getTime())).size).to.equal(1);
  });

  it('refuses jobs nobody defined', async () => {
    const err = await jobs.send(jobRef('no.such.job'), {}).catch((e: Error) => e);
    expect(err).to.be.instanceOf(Error);
    expect((err as Error).message).to.match(/unknown job/);
  });

  it('stop() waits for the running handler, which sees the stop signal', async () => {
    const name = queueName('slow');
    const events: string[] = [];
    const started = deferred();
    const release = deferred();
    let sawAbort = false;
    const queue = createJobQueue(db, quietLog);
    queue.define({
      name,
      handler: async (_data, job) => {
        events.push('started');
        started.resolve();
        await release.promise;
        sawAbort = job.signal.aborted;
        events.push('finished');
      },
    });
    await queue.start();
    const id = await queue.send(jobRef(name), {});
    await started.promise;

    const stopping = queue.stop().then(() => events.push('stopped'));
    // Let the stop get going (pg-boss polls its workers): it must not resolve while the handler runs.
    await new Promise((r) => setTimeout(r, 700));
    events.push('released');
    release.resolve();
    await stopping;

    expect(events).to.deep.equal(['started', 'released', 'finished', 'stopped']);
    expect(sawAbort).to.equal(true);
    // The job was completed before the queue let go of its connection.
    expect((await jobs.getJob(name, id!))!.state).to.equal('completed');
    // Stopping again is a no-op; sending on a stopped queue fails.
    await queue.stop();
    expect(await queue.send(jobRef(name), {}).catch((e: Error) => e)).to.be.instanceOf(Error);
  });

  it('stops at once when never started', async () => {
    const queue = createJobQueue(db, quietLog);
    queue.define({ name: queueName('idle'), handler: async () => {} });
    await queue.stop();
    await queue.stop();
  });
});

describe(`job queue across a restart (${usingPostgres ? 'PostgreSQL' : 'PGlite data directory'})`, function () {
  this.timeout(90_000);
  let dir: string | undefined;

  before(() => {
    if (!usingPostgres) dir = mkdtempSync(join(tmpdir(), 'jobs-restart-'));
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs a delayed job after the services stopped and started again on the same database', async () => {
    const name = queueName('durable');
    const dataDir = dir ? join(dir, 'pglite') : 'memory://';

    let db = await openDb(dataDir);
    let jobs = createJobQueue(db, quietLog);
    let ranBeforeRestart = false;
    jobs.define({
      name,
      handler: async () => {
        ranBeforeRestart = true;
      },
    });
    await jobs.start();
    const id = await jobs.send(jobRef(name), { survives: true }, { delayMs: 1000 });
    await jobs.stop();
    await db.close();
    expect(ranBeforeRestart).to.equal(false);

    db = await openDb(dataDir);
    jobs = createJobQueue(db, quietLog);
    const ran: { data: unknown; id: string }[] = [];
    jobs.define({
      name,
      handler: async (data, job) => {
        ran.push({ data, id: job.id });
      },
    });
    try {
      await jobs.start();
      await waitFor('the job after the restart', () => ran.length > 0, deadline);
      expect(ran).to.deep.equal([{ data: { survives: true }, id }]);
      await waitFor(
        'completion',
        async () => (await jobs.getJob(name, id!))?.state === 'completed',
        deadline,
      );
    } finally {
      await jobs.stop();
      await db.close();
    }
  });
});
