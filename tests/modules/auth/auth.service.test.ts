// Test tier: unit
import { expect } from 'chai';
import type { Actor } from '../../../server/access/actor.js';
import { User } from '../../../server/access/user.entity.js';
import type { ActorContext, AppDeps } from '../../../server/kit/deps.js';
import { purgeExpiredSessions } from '../../../server/modules/auth/auth.service.js';
import * as sessions from '../../../server/modules/auth/sessions.service.js';
import { InMemorySessionsRepository } from './in-memory-sessions.repository.js';
import { NO_EM, reference } from '../../support/in-memory.js';
import { actorOf, appRejection } from '../../support/unit.js';

/**
 * The login sessions of the auth module (sessions.service.ts, and the purge of auth.service.ts) against an in-memory
 * repository (./in-memory-sessions.repository.ts): no server, no database.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

function harness() {
  const repo = new InMemorySessionsRepository();
  const clock = { t: Date.parse('2026-11-01T00:00:00.000Z') };
  const deps = {
    clock: { now: () => new Date(clock.t) },
    modules: { auth: { repository: repo } },
  } as unknown as AppDeps;
  const ctx = (actor: Actor): ActorContext => ({
    em: NO_EM,
    deps,
    actor,
    requestId: 'req',
    ip: '127.0.0.1',
    userAgent: undefined,
  });
  let n = 0;
  /** A session of `userId` opened `ago` ms before now, expiring `ttl` ms after now. */
  const open = (userId: string, ago: number, ttl = 30 * DAY) => {
    const now = clock.t;
    return repo.createSession(NO_EM, {
      id: `ses_${String(++n).padStart(4, '0')}`,
      now: new Date(now - ago),
      user: reference(User, userId),
      expiresAt: new Date(now + ttl),
      ip: '10.0.0.1',
      userAgent: 'test',
    });
  };
  return { repo, clock, ctx, open };
}

const sessionActor = (userId: string, sessionId: string): Actor => ({
  ...actorOf('org_1', userId, 'member'),
  sessionId,
});

describe('auth sessions service (in-memory repository)', () => {
  it("lists the caller's live sessions newest first and marks the current one", async () => {
    const h = harness();
    const old = h.open('usr_a', 2 * HOUR);
    const current = h.open('usr_a', HOUR);
    h.open('usr_a', 3 * HOUR, -1); // expired
    h.open('usr_b', 0); // someone else's
    const out = await sessions.listSessions(h.ctx(sessionActor('usr_a', current.id)));
    expect(out.total).to.equal(2);
    expect(out.sessions.map((s) => [s.id, s.current])).to.deep.equal([
      [current.id, true],
      [old.id, false],
    ]);
    expect(out.sessions[1]).to.include({ ip: '10.0.0.1', user_agent: 'test' });
  });

  it("revokes one of the caller's sessions; anyone else's, a malformed id or a revoked one is 404", async () => {
    const h = harness();
    const mine = h.open('usr_a', HOUR);
    const theirs = h.open('usr_b', HOUR);
    const ctx = h.ctx(sessionActor('usr_a', 'ses_current'));
    expect((await appRejection(sessions.revokeSession(ctx, 'not-an-id'))).code).to.equal('NOT_FOUND');
    expect((await appRejection(sessions.revokeSession(ctx, theirs.id))).code).to.equal('NOT_FOUND');
    expect(theirs.revokedAt).to.equal(null);
    expect(await sessions.revokeSession(ctx, mine.id)).to.deep.equal({
      success: true,
      message: 'The session is signed out',
      id: mine.id,
    });
    expect(mine.revokedAt?.getTime()).to.equal(h.clock.t);
    expect((await appRejection(sessions.revokeSession(ctx, mine.id))).code).to.equal('NOT_FOUND');
  });

  it('revokes every live session of the caller, keeping the current one only when asked', async () => {
    const h = harness();
    const a = h.open('usr_a', HOUR);
    const b = h.open('usr_a', 2 * HOUR);
    const other = h.open('usr_b', HOUR);
    const kept = await sessions.revokeAllSessions(h.ctx(sessionActor('usr_a', a.id)), { keep_current: true });
    expect(kept).to.deep.equal({ success: true, message: 'Every other session is signed out', revoked: 1 });
    expect([a.revokedAt, b.revokedAt !== null]).to.deep.equal([null, true]);
    const all = await sessions.revokeAllSessions(h.ctx(sessionActor('usr_a', a.id)), { keep_current: false });
    expect(all.revoked).to.equal(1);
    expect(a.revokedAt).to.not.equal(null);
    expect(other.revokedAt).to.equal(null);
  });

  it('purges sessions that expired or were revoked more than a day ago', async () => {
    const h = harness();
    const expired = h.open('usr_a', 40 * DAY, -2 * DAY);
    const recent = h.open('usr_a', 40 * DAY, -HOUR);
    const revoked = h.open('usr_a', HOUR);
    revoked.revokedAt = new Date(h.clock.t - 2 * DAY);
    const live = h.open('usr_a', HOUR);
    expect(await purgeExpiredSessions(h.ctx(sessionActor('usr_a', live.id)).deps)).to.equal(2);
    expect(h.repo.sessions.map((s) => s.id)).to.deep.equal([recent.id, live.id]);
    expect(expired.id).to.not.be.oneOf(h.repo.sessions.map((s) => s.id));
  });
});
