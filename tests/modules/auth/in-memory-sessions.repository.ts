import { LoginSession } from '../../../server/access/session.entity.js';
import type { Em } from '../../../server/db/orm.js';
import type { AuthRepository, NewSession } from '../../../server/modules/auth/auth.repository.js';
import { row } from '../../support/in-memory.js';

/**
 * What of the auth repository the sessions service (server/modules/auth/sessions.service.ts) and the purge use: the
 * rest of the auth repository (sign-in, tokens, two-factor) is exercised on the database.
 */
export type SessionsRepository = Pick<
  AuthRepository,
  'createSession' | 'liveSessions' | 'revokeLiveSession' | 'revokeSessionsOf' | 'purgeSessions'
>;

const live = (s: LoginSession, now: Date) => !s.revokedAt && s.expiresAt > now;

/**
 * The login-session part of the auth repository (server/modules/auth/auth.repository.ts) over an array, for unit
 * tests of the sessions service: no database, no server; held to the MikroORM repository by
 * ./sessions.repository-contract.ts. Rows are entity instances.
 */
export class InMemorySessionsRepository implements SessionsRepository {
  readonly sessions: LoginSession[] = [];

  createSession(_tx: Em, s: NewSession): LoginSession {
    const session = row(LoginSession, {
      id: s.id,
      createdAt: s.now,
      updatedAt: s.now,
      user: s.user,
      expiresAt: s.expiresAt,
      revokedAt: null,
      ip: s.ip,
      userAgent: s.userAgent,
      lastUsedAt: s.now,
      method: s.method ?? 'password',
    });
    this.sessions.push(session);
    return session;
  }

  liveSessions(_em: Em, userId: string, now: Date): Promise<LoginSession[]> {
    const rows = this.sessions
      .filter((s) => s.user.id === userId && live(s, now))
      .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1));
    return Promise.resolve(rows);
  }

  revokeLiveSession(_em: Em, userId: string, id: string, now: Date): Promise<boolean> {
    const s = this.sessions.find((x) => x.id === id && x.user.id === userId && live(x, now));
    if (!s) return Promise.resolve(false);
    s.revokedAt = now;
    s.updatedAt = now;
    return Promise.resolve(true);
  }

  revokeSessionsOf(_em: Em, userId: string, keep: string | null, now: Date): Promise<number> {
    let n = 0;
    for (const s of this.sessions) {
      if (s.user.id !== userId || !live(s, now) || s.id === keep) continue;
      s.revokedAt = now;
      s.updatedAt = now;
      n += 1;
    }
    return Promise.resolve(n);
  }

  purgeSessions(cutoff: Date): Promise<number> {
    const before = this.sessions.length;
    const kept = this.sessions.filter(
      (s) => !(s.expiresAt < cutoff || (!!s.revokedAt && s.revokedAt < cutoff)),
    );
    this.sessions.splice(0, this.sessions.length, ...kept);
    return Promise.resolve(before - kept.length);
  }
}
