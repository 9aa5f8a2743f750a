import { expect } from 'chai';
import type { User } from '../../../server/access/user.entity.js';
import type { Em } from '../../../server/db/orm.js';
import { newId } from '../../../server/lib/ids.js';
import type { ContractWorld } from '../../support/repository-contract.js';
import type { SessionsRepository } from './in-memory-sessions.repository.js';

/** What the login sessions' contract runs against: a repository, a unit of work to hand it, the users it refers to. */
export interface SessionsContractSubject {
  repo: SessionsRepository;
  em(): Em;
  /** Writes what `em` created (the sign-in's transaction commits it). */
  flush(em: Em): Promise<void>;
  /** The user `id` as a session's owner in `em` (a reference, not loaded). */
  user(em: Em, id: string): User;
  world: ContractWorld;
}

// Long past: the purge (of every user's rows) removes only this suite's sessions on a shared database; the purge's
// test has hours of its own, before every other session of the suite.
const hoursFrom = (t0: number) => (hours: number) => new Date(t0 + hours * 3_600_000);
const at = hoursFrom(Date.parse('1999-01-01T00:00:00.000Z'));
const early = hoursFrom(Date.parse('1998-01-01T00:00:00.000Z'));

/**
 * The behaviour of the login-session part of the auth repository that the sessions service and the purge rely on
 * (docs/accounts-and-sessions.md, "Accounts and sessions"), run against the MikroORM repository on the test database and the in-memory
 * one of the unit tests (tests/modules/auth/sessions.repository-contract.test.ts).
 */
export function describeSessionsRepositoryContract(
  label: string,
  make: () => Promise<SessionsContractSubject>,
): void {
  describe(`login sessions of the AuthRepository contract: ${label}`, () => {
    let s: SessionsContractSubject;
    beforeEach(async () => {
      s = await make();
    });

    /** A session of `userId` opened at hour `opened`, expiring at hour `expires` (of `hour`). */
    async function session(userId: string, opened: number, expires: number, hour = at): Promise<string> {
      const id = newId('ses');
      const em = s.em();
      s.repo.createSession(em, {
        id,
        now: hour(opened),
        user: s.user(em, userId),
        expiresAt: hour(expires),
        ip: '10.0.0.1',
        userAgent: 'contract',
      });
      await s.flush(em);
      return id;
    }

    it("lists a user's live sessions newest first, and revokes one of them once", async () => {
      const a = await s.world.organization();
      const other = await s.world.user(a.organizationId);
      const old = await session(a.userId, 1, 100);
      const recent = await session(a.userId, 2, 100);
      await session(a.userId, 0, 5); // expired at hour 10
      const theirs = await session(other, 3, 100);
      const live = async (userId: string) =>
        (await s.repo.liveSessions(s.em(), userId, at(10))).map((x) => x.id);

      expect(await live(a.userId)).to.deep.equal([recent, old]);
      const [first] = await s.repo.liveSessions(s.em(), a.userId, at(10));
      expect(first).to.include({ id: recent, ip: '10.0.0.1', userAgent: 'contract', revokedAt: null });
      expect(first!.lastUsedAt?.getTime()).to.equal(at(2).getTime());
      expect(await s.repo.revokeLiveSession(s.em(), a.userId, theirs, at(10))).to.equal(false);
      expect(await s.repo.revokeLiveSession(s.em(), a.userId, old, at(10))).to.equal(true);
      expect(await s.repo.revokeLiveSession(s.em(), a.userId, old, at(10))).to.equal(false);
      expect(await live(a.userId)).to.deep.equal([recent]);
      expect(await live(other)).to.deep.equal([theirs]);
    });

    it("revokes a user's other live sessions, keeping one or none, and purges what ended before a cutoff", async () => {
      const a = await s.world.organization();
      const other = await s.world.user(a.organizationId);
      const keep = await session(a.userId, 1, 100, early);
      await session(a.userId, 2, 100, early);
      await session(a.userId, 3, 100, early);
      await session(a.userId, 0, 5, early); // expired: not counted
      const theirs = await session(other, 1, 100, early);

      expect(await s.repo.revokeSessionsOf(s.em(), a.userId, keep, early(10))).to.equal(2);
      expect((await s.repo.liveSessions(s.em(), a.userId, early(10))).map((x) => x.id)).to.deep.equal([keep]);
      expect(await s.repo.revokeSessionsOf(s.em(), a.userId, null, early(11))).to.equal(1);
      expect((await s.repo.liveSessions(s.em(), other, early(11))).map((x) => x.id)).to.deep.equal([theirs]);

      // Cutoff at hour 10.5: the expired one and the two revoked at hour 10 go; the one revoked at 11 stays.
      expect(await s.repo.purgeSessions(early(10.5))).to.equal(3);
      expect(await s.repo.purgeSessions(early(12))).to.equal(1);
      expect((await s.repo.liveSessions(s.em(), other, early(11))).map((x) => x.id)).to.deep.equal([theirs]);
    });
  });
}
