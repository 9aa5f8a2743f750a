// Test tier: db
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { PgBoss } from 'pg-boss';
import type { Database } from '../../server/db/orm.js';
import { createJobQueue, jobRef, type JobQueue } from '../../server/jobs/queue.js';
import { usingPostgres } from '../support/env.js';
import { openMigratedDatabase, quietLog } from '../support/migrated-database.js';
import { waitFor } from '../support/wait.js';

/**
 * A send with `{ em }` wakes the job's workers itself once the outermost transaction commits, and never when it
 * rolls back (docs/jobs.md, "What the queue layer adds"). The queue polls once a minute here: a job that runs within
 * the test's deadline was woken, not found by a poll. The wakes themselves are counted on pg-boss's `notifyWorker`.
 */
describe(`job queue: a send wakes its workers after the commit (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(60_000);
  const name = `test.wake.${randomBytes(4).toString('hex')}`;
  const ref = jobRef<{ label: string }>(name);
  /** Well under the polling interval: a job run by then was woken. */
  const promptly = { timeoutMs: 20_000 };
  let db: Database;
  let jobs: JobQueue;
  const ran: string[] = [];
  let wakes = 0;
  // Called below with the instance as `this`.
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const realNotifyWorker = PgBoss.prototype.notifyWorker;

  before(async () => {
    PgBoss.prototype.notifyWorker = function (this: PgBoss, id: string) {
      wakes++;
      return realNotifyWorker.call(this, id);
    };
    db = await openMigratedDatabase();
    jobs = createJobQueue(db, quietLog);
    jobs.define<{ label: string }>({
      name,
      pollingIntervalSeconds: 60,
      handler: async (data) => {
        ran.push(data.label);
      },
    });
    await jobs.start();
  });

  after(async () => {
    PgBoss.prototype.notifyWorker = realNotifyWorker;
    await jobs?.stop();
    await db?.close();
  });

  beforeEach(() => {
    wakes = 0;
  });

  /** Waits for the job to run and complete (the worker's own wake after a batch comes before its completion). */
  async function ranToCompletion(id: string, label: string) {
    await waitFor(`job ${label} to run`, () => ran.includes(label), promptly);
    await waitFor(
      `job ${label} to complete`,
      async () => (await jobs.getJob(name, id))?.state === 'completed',
      promptly,
    );
  }

  it('wakes the workers once the transaction commits, not before', async () => {
    let id: string | null = null;
    await db.orm.em.fork().transactional(async (tx) => {
      id = await jobs.send(ref, { label: 'committed' }, { em: tx });
      await tx.execute('select 1');
      expect(wakes, 'wakes before the commit').to.equal(0);
    });
    expect(wakes, 'wakes at the commit').to.be.at.least(1);
    await ranToCompletion(id!, 'committed');
  });

  it('does not wake them when the transaction rolls back', async () => {
    let id: string | null = null;
    const failure = await db.orm.em
      .fork()
      .transactional(async (tx) => {
        id = await jobs.send(ref, { label: 'rolled back' }, { em: tx });
        throw new Error('abort the change');
      })
      .catch((err: Error) => err);
    expect(failure).to.be.instanceOf(Error);
    expect(wakes).to.equal(0);
    expect(await jobs.getJob(name, id!)).to.equal(null);
  });

  it('wakes for a savepoint’s send only when the outer transaction commits', async () => {
    let id: string | null = null;
    await db.orm.em.fork().transactional(async (tx) => {
      await tx.transactional(async (inner) => {
        id = await jobs.send(ref, { label: 'in a savepoint' }, { em: inner });
      });
      await tx.execute('select 1');
      expect(wakes, 'wakes after the savepoint is released').to.equal(0);
    });
    expect(wakes, 'wakes at the outer commit').to.be.at.least(1);
    await ranToCompletion(id!, 'in a savepoint');
  });

  it('does not wake for the send of a savepoint rolled back, though the outer transaction commits', async () => {
    let id: string | null = null;
    await db.orm.em.fork().transactional(async (tx) => {
      const failure = await tx
        .transactional(async (inner) => {
          id = await jobs.send(ref, { label: 'savepoint rolled back' }, { em: inner });
          throw new Error('abort the savepoint');
        })
        .catch((err: Error) => err);
      expect(failure).to.be.instanceOf(Error);
    });
    expect(wakes).to.equal(0);
    expect(await jobs.getJob(name, id!)).to.equal(null);
    expect(ran).not.to.include('savepoint rolled back');
  });

  it('wakes at once for a send with an em outside any transaction', async () => {
    const id = await jobs.send(ref, { label: 'no transaction' }, { em: db.orm.em.fork() });
    expect(wakes).to.be.at.least(1);
    await ranToCompletion(id!, 'no transaction');
  });
});
