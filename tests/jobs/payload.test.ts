// Test tier: db
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { z } from 'zod';
import type { Database } from '../../server/db/orm.js';
import { createJobQueue, jobRef, type JobQueue } from '../../server/jobs/queue.js';
import { usingPostgres } from '../support/env.js';
import { openMigratedDatabase, quietLog } from '../support/migrated-database.js';
import { waitFor } from '../support/wait.js';

/** A job's payload schema is checked when it is sent and before it runs (docs/jobs.md, "What the queue layer adds"). */
describe(`job queue: payload schemas (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(60_000);
  const name = `test.payload.${randomBytes(4).toString('hex')}`;
  const ref = jobRef<{ n: number }>(name);
  const deadline = { timeoutMs: 20_000 };
  let db: Database;
  let jobs: JobQueue;
  const ran: unknown[] = [];

  before(async () => {
    db = await openMigratedDatabase();
    jobs = createJobQueue(db, quietLog);
    jobs.define<{ n: number }>({
      name,
      payload: z.object({ n: z.number().int() }),
      // Retries allowed: a job whose data does not match must not use them.
      retryLimit: 3,
      retryDelaySeconds: 0,
      handler: async (data) => {
        ran.push(data);
      },
    });
    await jobs.start();
  });

  after(async () => {
    await jobs?.stop();
    await db?.close();
  });

  it('refuses to send data that does not match, and sends data that does', async () => {
    const bad = { n: 'one' } as unknown as { n: number };
    const refused = await jobs.send(ref, bad).catch((err: Error) => err);
    expect(refused).to.be.instanceOf(Error);
    expect((refused as Error).message).to.match(/does not match its payload schema \(n: /);

    const id = await jobs.send(ref, { n: 1 });
    await waitFor(
      'the valid job to complete',
      async () => (await jobs.getJob(name, id!))?.state === 'completed',
      deadline,
    );
    expect(ran).to.deep.equal([{ n: 1 }]);
  });

  it('fails a stored job whose data does not match, at once and without retries, never calling the handler', async () => {
    ran.length = 0;
    // As a job queued by an older version with other data would be: sent valid, then its stored data changed.
    const id = await jobs.send(ref, { n: 2 }, { delayMs: 60_000 });
    await db.orm.em
      .fork()
      .getConnection()
      .execute(`update pgboss.job set data = '{"n": "two"}'::jsonb, start_after = now() where id = ?`, [id]);
    jobs.notify(name);
    const failed = await waitFor(
      'the job to fail',
      async () => {
        const job = await jobs.getJob(name, id!);
        return job?.state === 'failed' && job;
      },
      deadline,
    );
    expect(failed.retryCount).to.equal(0);
    expect((failed.output as { message: string }).message).to.match(/does not match its payload schema/);
    expect(ran).to.deep.equal([]);
  });
});
