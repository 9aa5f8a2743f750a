// Test tier: server
import { purgeExpiredSessionsJob } from '../../server/modules/auth/auth.jobs.js';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { RefreshToken, LoginSession } from '../../server/access/session.entity.js';
import { User } from '../../server/access/user.entity.js';
import { newId } from '../../server/lib/ids.js';
import { purgeExpiredSessions } from '../../server/modules/auth/auth.service.js';
import { createOrg } from '../support/factories.js';
import { FakeClock } from '../support/fake-clock.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('job auth.purge-expired-sessions', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  /**
   * Sessions anchored in 2020 (long before anything else in the database), each with a refresh token, so the purge
   * with a clock at that time touches nothing but them.
   */
  async function makeSessions(now: Date) {
    const owner = await createOrg(s.deps);
    const em = s.deps.db.orm.em.fork();
    const user = em.getReference(User, owner.id);
    const at = (offset: number) => new Date(now.getTime() + offset);
    const specs = {
      expiredTwoDaysAgo: { expiresAt: at(-2 * DAY), revokedAt: null },
      expiredHoursAgo: { expiresAt: at(-12 * HOUR), revokedAt: null },
      revokedTwoDaysAgo: { expiresAt: at(20 * DAY), revokedAt: at(-2 * DAY) },
      revokedAnHourAgo: { expiresAt: at(20 * DAY), revokedAt: at(-HOUR) },
      live: { expiresAt: at(20 * DAY), revokedAt: null },
    };
    const ids = {} as Record<keyof typeof specs, string>;
    for (const [label, spec] of Object.entries(specs)) {
      const session = em.create(LoginSession, { id: newId('ses'), user, ip: null, userAgent: null, ...spec });
      em.create(RefreshToken, {
        id: newId('ses').replace(/^ses_/, 'rtk_'),
        session,
        tokenHash: randomBytes(32).toString('hex'),
        expiresAt: spec.expiresAt,
        usedAt: null,
      });
      ids[label as keyof typeof specs] = session.id;
    }
    await em.flush();
    return ids;
  }

  async function remaining(ids: Record<string, string>) {
    const em = s.deps.db.orm.em.fork();
    const rows = await em.find(LoginSession, { id: { $in: Object.values(ids) } });
    const byId = new Set(rows.map((r) => r.id));
    return Object.keys(ids).filter((label) => byId.has(ids[label]!));
  }

  it('deletes sessions expired or revoked more than a day ago, with their refresh tokens, and keeps the others', async () => {
    const clock = new FakeClock('2020-03-01T12:00:00.000Z');
    const ids = await makeSessions(clock.now());

    const purged = await purgeExpiredSessions({ ...s.deps, clock });
    expect(purged).to.equal(2);
    expect(await remaining(ids)).to.deep.equal(['expiredHoursAgo', 'revokedAnHourAgo', 'live']);
    const tokens = await s.deps.db.orm.em
      .fork()
      .count(RefreshToken, { session: { $in: [ids.expiredTwoDaysAgo, ids.revokedTwoDaysAgo] } });
    expect(tokens).to.equal(0);

    // A day later the other two qualify as well; the live session stays.
    clock.advance(DAY);
    expect(await purgeExpiredSessions({ ...s.deps, clock })).to.equal(2);
    expect(await remaining(ids)).to.deep.equal(['live']);
  });

  it('runs as a job on the queue of the running server', async () => {
    // Anchored 400 days ago, every one of these sessions is long expired for the server's real clock.
    const ids = await makeSessions(new Date(Date.now() - 400 * DAY));
    const id = await s.deps.jobs.send(purgeExpiredSessionsJob, {});
    s.deps.jobs.notify('auth.purge-expired-sessions');
    await waitFor(
      'the purge job to complete',
      async () => {
        const job = await s.deps.jobs.getJob('auth.purge-expired-sessions', id!);
        expect(job?.state, 'the purge job').to.not.equal('failed');
        return job?.state === 'completed';
      },
      { timeoutMs: 20_000 },
    );
    expect(await remaining(ids)).to.deep.equal([]);
  });
});
