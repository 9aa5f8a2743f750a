import { repositoryOf } from '../../kit/runtime.js';
import { MikroOrmRepository } from '../../kit/repository.js';
import { LockMode } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import {
  LoginSession,
  LoginThrottleSchema,
  RefreshToken,
  type SessionMethod,
} from '../../access/session.entity.js';
import {
  createUserEntity,
  signInAccountOf,
  User,
  UserSchema,
  type NewUserData,
} from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import type { EventDefinition } from '../../events/define-event.js';
import type { AppDeps } from '../../kit/deps.js';
import type { OrganizationRows } from '../../kit/module.js';
import type { PlanId } from '../../lib/plans.js';
import { PasswordResetToken, PasswordResetTokenSchema } from './password-reset.entity.js';
import {
  LoginChallenge,
  LoginChallengeSchema,
  RecoveryCode,
  RecoveryCodeSchema,
  TwoFactorCredential,
  TwoFactorCredentialSchema,
} from './two-factor.entity.js';

/**
 * Every read and write of the auth module (docs/adding-a-module.md, "Checklist", step 3): sign-in, sessions and refresh
 * tokens, password resets and two-factor sign-in go through an {@link AuthRepository}, never through the ORM or SQL
 * themselves. The process gets the MikroORM one ({@link MikroOrmAuthRepository}) from the module's `create`
 * (`repositoryOf(deps, 'auth')`).
 *
 * A unit of work is an `Em` to the caller: opaque, handed back to the repository (and to the kit's functions that
 * write in the same transaction, such as the job queue's `send` or the audit log). Rows are the entities; a change to
 * a row read in a transaction is written when the transaction commits.
 *
 * The access check of every request (the session and user behind an access token) is not here: it is the access
 * core's prepared query (server/access/actor.ts).
 */

/** The module's tables, from its entities (the manifest's lists and the SQL below name them from here). */
export const AUTH_TABLES = {
  twoFactorCredentials: TwoFactorCredentialSchema.tableName,
  recoveryCodes: RecoveryCodeSchema.tableName,
  loginChallenges: LoginChallengeSchema.tableName,
  passwordResetTokens: PasswordResetTokenSchema.tableName,
} as const;

const T = AUTH_TABLES;

/** What a new login session row holds. */
export interface NewSession {
  id: string;
  now: Date;
  user: User;
  expiresAt: Date;
  ip: string | null;
  userAgent: string | null;
  /** How the session was opened (`password` when absent). */
  method?: SessionMethod;
}

/** What a new refresh token row holds (its value is given once, only its hash is kept). */
export interface NewRefreshToken {
  id: string;
  now: Date;
  session: LoginSession;
  tokenHash: string;
  expiresAt: Date;
}

/** What a new password-reset token row holds. */
export interface NewPasswordResetToken {
  id: string;
  now: Date;
  user: User;
  tokenHash: string;
  expiresAt: Date;
}

/** What a new two-factor sign-in challenge row holds. */
export interface NewLoginChallenge {
  id: string;
  now: Date;
  user: User;
  tokenHash: string;
  expiresAt: Date;
}

export interface AuthRepository {
  // ---------- units of work ----------
  /** A fresh unit of work (jobs, the bootstrap at start). */
  fork(): Em;
  /** Runs `work` in a transaction of `em` (committed when it returns, rolled back when it throws). */
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;
  /** Writes what `em` holds (outside a transaction: rows created on it). */
  flush(em: Em): Promise<void>;

  // ---------- users and organizations ----------
  /** The address's sign-in account (not deleted, not an invitation), with its organization (and password hash). */
  findSignInAccount(em: Em, email: string, opts?: { withPasswordHash?: boolean }): Promise<User | null>;
  signInAccountExists(em: Em, email: string): Promise<boolean>;
  /** The active, undeleted user of `email` with its organization and password hash (who a reset mail goes to). */
  findResetRecipient(em: Em, email: string): Promise<User | null>;
  /** The user `id` with its organization; throws when gone. */
  userWithOrganization(em: Em, id: string): Promise<User>;
  /** The user `id` as committed (no populate); throws when gone. */
  getUser(em: Em, id: string): Promise<User>;
  /** The user `id` with its row locked (`tx`) and its organization (and password hash); throws when gone. */
  lockUser(tx: Em, id: string, opts?: { withPasswordHash?: boolean }): Promise<User>;
  createOrganization(tx: Em, org: { id: string; name: string; plan: PlanId }): Organization;
  createUser(tx: Em, data: NewUserData): User;
  /** The organization `id` read again under a share lock (a deletion waits), or null. */
  lockOrganizationShared(tx: Em, id: string): Promise<Organization | null>;

  // ---------- sessions and refresh tokens ----------
  createSession(tx: Em, s: NewSession): LoginSession;
  createRefreshToken(tx: Em, t: NewRefreshToken): RefreshToken;
  /** The refresh token of `tokenHash` with its session, the session's user and organization. */
  findRefreshToken(tx: Em, tokenHash: string): Promise<RefreshToken | null>;
  /** Marks the refresh token used if it is not yet; false when another use claimed it first. */
  claimRefreshToken(tx: Em, id: string, now: Date): Promise<boolean>;
  /** Revokes the session `id` if it is not revoked yet (a reused refresh token). */
  revokeSessionChain(tx: Em, id: string, now: Date): Promise<void>;
  /** Revokes the session `id` (logout). */
  signOutSession(em: Em, id: string, now: Date): Promise<void>;
  /** The user's live sessions, newest first. */
  liveSessions(em: Em, userId: string, now: Date): Promise<LoginSession[]>;
  /** Revokes the user's live session `id`; false when there is none such. */
  revokeLiveSession(em: Em, userId: string, id: string, now: Date): Promise<boolean>;
  /** Revokes the user's live sessions but `keep` (none when null); how many were revoked. */
  revokeSessionsOf(em: Em, userId: string, keep: string | null, now: Date): Promise<number>;
  /** Deletes sessions that expired or were revoked before `cutoff`; how many. */
  purgeSessions(cutoff: Date): Promise<number>;
  /** Clears the login throttle of `key` (a successful sign-in). */
  clearThrottle(tx: Em, key: string): Promise<void>;

  // ---------- password resets ----------
  createPasswordResetToken(em: Em, t: NewPasswordResetToken): PasswordResetToken;
  /** How many reset tokens of the user were created after `since`. */
  countResetTokensSince(em: Em, userId: string, since: Date): Promise<number>;
  /** The reset token of `tokenHash` with its user. */
  findPasswordResetToken(em: Em, tokenHash: string): Promise<PasswordResetToken | null>;
  /** Uses up the token if it is unused and unexpired at `now`; false otherwise. */
  claimPasswordResetToken(tx: Em, id: string, now: Date): Promise<boolean>;
  /** Voids the user's unused reset tokens. */
  voidResetTokens(tx: Em, userId: string, now: Date): Promise<void>;

  // ---------- two-factor ----------
  /** The user's credential with its secrets, its row locked (`tx`) when `lock` is set. */
  credentialOf(em: Em, userId: string, lock?: boolean): Promise<TwoFactorCredential | null>;
  /** A credential with only a pending secret (setup). */
  createCredential(tx: Em, c: { id: string; now: Date; userId: string; pendingSecret: string }): void;
  removeCredential(tx: Em, cred: TwoFactorCredential): void;
  /** Records `step` as the last accepted one if it is later than the last; false otherwise (a replayed code). */
  claimStep(tx: Em, credentialId: string, step: number, now: Date): Promise<boolean>;
  /** Marks the user's unused recovery code of `codeHash` used; false when there is none. */
  useRecoveryCode(tx: Em, userId: string, codeHash: string, now: Date): Promise<boolean>;
  deleteRecoveryCodes(tx: Em, userId: string): Promise<void>;
  addRecoveryCodes(tx: Em, user: User, codes: readonly { id: string; codeHash: string }[], now: Date): void;
  createLoginChallenge(em: Em, c: NewLoginChallenge): LoginChallenge;
  /** The challenge of `tokenHash` with its user and the user's organization. */
  findLoginChallenge(em: Em, tokenHash: string): Promise<LoginChallenge | null>;
  /** The challenge `id`, if still open, with its row locked (`tx`). */
  lockOpenChallenge(tx: Em, id: string): Promise<LoginChallenge | null>;
  deleteLoginChallenges(tx: Em, userId: string): Promise<void>;
  /** Deletes challenges that expired before `cutoff`; how many. */
  purgeLoginChallenges(cutoff: Date): Promise<number>;

  // ---------- events ----------
  /** Records a webhook event in `tx` (the transactional outbox). */
  recordEvent<P>(tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, now: Date): void;
}

/** The module's data access, as the module's `create` built it for this process. */
export function authRepositoryOf(deps: AppDeps): AuthRepository {
  return repositoryOf(deps, 'auth');
}

/** The rows of an organization's users, in tables keyed by user. */
const ORGANIZATION_USERS = `"user_id" in (select "id" from "${UserSchema.tableName}" where "organization_id" = ?)`;

/** What deleting an organization removes of the module's tables (the manifest's `organizationRows`). */
export const AUTH_ORGANIZATION_ROWS: OrganizationRows = {
  remove: [
    { table: T.loginChallenges, where: ORGANIZATION_USERS },
    { table: T.recoveryCodes, where: ORGANIZATION_USERS },
    { table: T.twoFactorCredentials, where: ORGANIZATION_USERS },
    { table: T.passwordResetTokens, where: ORGANIZATION_USERS },
  ],
};

// ---------- the MikroORM implementation ----------

const CLEAR_THROTTLE = `delete from ${LoginThrottleSchema.tableName} where key = ?`;

export class MikroOrmAuthRepository extends MikroOrmRepository implements AuthRepository {
  findSignInAccount(em: Em, email: string, opts: { withPasswordHash?: boolean } = {}): Promise<User | null> {
    return em.findOne(User, signInAccountOf(email), {
      populate: opts.withPasswordHash ? ['passwordHash', 'organization'] : ['organization'],
    });
  }

  async signInAccountExists(em: Em, email: string): Promise<boolean> {
    return (await em.count(User, signInAccountOf(email))) > 0;
  }

  findResetRecipient(em: Em, email: string): Promise<User | null> {
    return em.findOne(
      User,
      { email, deletedAt: null, status: 'active' },
      { populate: ['organization', 'passwordHash'] },
    );
  }

  userWithOrganization(em: Em, id: string): Promise<User> {
    return em.findOneOrFail(User, id, { populate: ['organization'] });
  }

  getUser(em: Em, id: string): Promise<User> {
    return em.findOneOrFail(User, { id });
  }

  lockUser(tx: Em, id: string, opts: { withPasswordHash?: boolean } = {}): Promise<User> {
    return tx.findOneOrFail(
      User,
      { id },
      {
        lockMode: LockMode.PESSIMISTIC_WRITE,
        populate: opts.withPasswordHash ? ['organization', 'passwordHash'] : ['organization'],
      },
    );
  }

  createOrganization(tx: Em, org: { id: string; name: string; plan: PlanId }): Organization {
    return tx.create(Organization, org);
  }

  createUser(tx: Em, data: NewUserData): User {
    return createUserEntity(tx, data);
  }

  lockOrganizationShared(tx: Em, id: string): Promise<Organization | null> {
    return tx.findOne(Organization, id, { lockMode: LockMode.PESSIMISTIC_READ, refresh: true });
  }

  createSession(tx: Em, s: NewSession): LoginSession {
    return tx.create(LoginSession, {
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
  }

  createRefreshToken(tx: Em, t: NewRefreshToken): RefreshToken {
    return tx.create(RefreshToken, {
      id: t.id,
      createdAt: t.now,
      updatedAt: t.now,
      session: t.session,
      tokenHash: t.tokenHash,
      expiresAt: t.expiresAt,
      usedAt: null,
    });
  }

  findRefreshToken(tx: Em, tokenHash: string): Promise<RefreshToken | null> {
    return tx.findOne(RefreshToken, { tokenHash }, { populate: ['session.user.organization'] });
  }

  async claimRefreshToken(tx: Em, id: string, now: Date): Promise<boolean> {
    return (await tx.nativeUpdate(RefreshToken, { id, usedAt: null }, { usedAt: now })) !== 0;
  }

  async revokeSessionChain(tx: Em, id: string, now: Date): Promise<void> {
    await tx.nativeUpdate(LoginSession, { id, revokedAt: null }, { revokedAt: now });
  }

  async signOutSession(em: Em, id: string, now: Date): Promise<void> {
    await em.nativeUpdate(LoginSession, { id }, { revokedAt: now });
  }

  liveSessions(em: Em, userId: string, now: Date): Promise<LoginSession[]> {
    return em.find(
      LoginSession,
      { user: userId, revokedAt: null, expiresAt: { $gt: now } },
      { orderBy: { createdAt: 'desc', id: 'desc' } },
    );
  }

  async revokeLiveSession(em: Em, userId: string, id: string, now: Date): Promise<boolean> {
    const n = await em.nativeUpdate(
      LoginSession,
      { id, user: userId, revokedAt: null, expiresAt: { $gt: now } },
      { revokedAt: now, updatedAt: now },
    );
    return n !== 0;
  }

  revokeSessionsOf(em: Em, userId: string, keep: string | null, now: Date): Promise<number> {
    return em.nativeUpdate(
      LoginSession,
      { user: userId, revokedAt: null, expiresAt: { $gt: now }, ...(keep ? { id: { $ne: keep } } : {}) },
      { revokedAt: now, updatedAt: now },
    );
  }

  purgeSessions(cutoff: Date): Promise<number> {
    return this.fork().nativeDelete(LoginSession, {
      $or: [{ expiresAt: { $lt: cutoff } }, { revokedAt: { $lt: cutoff } }],
    });
  }

  async clearThrottle(tx: Em, key: string): Promise<void> {
    await tx.execute(CLEAR_THROTTLE, [key]);
  }

  createPasswordResetToken(em: Em, t: NewPasswordResetToken): PasswordResetToken {
    return em.create(PasswordResetToken, {
      id: t.id,
      createdAt: t.now,
      updatedAt: t.now,
      user: t.user,
      tokenHash: t.tokenHash,
      expiresAt: t.expiresAt,
      usedAt: null,
    });
  }

  countResetTokensSince(em: Em, userId: string, since: Date): Promise<number> {
    return em.count(PasswordResetToken, { user: userId, createdAt: { $gt: since } });
  }

  findPasswordResetToken(em: Em, tokenHash: string): Promise<PasswordResetToken | null> {
    return em.findOne(PasswordResetToken, { tokenHash }, { populate: ['user'] });
  }

  async claimPasswordResetToken(tx: Em, id: string, now: Date): Promise<boolean> {
    const claimed = await tx.nativeUpdate(
      PasswordResetToken,
      { id, usedAt: null, expiresAt: { $gt: now } },
      { usedAt: now, updatedAt: now },
    );
    return claimed !== 0;
  }

  async voidResetTokens(tx: Em, userId: string, now: Date): Promise<void> {
    await tx.nativeUpdate(
      PasswordResetToken,
      { user: userId, usedAt: null },
      { usedAt: now, updatedAt: now },
    );
  }

  credentialOf(em: Em, userId: string, lock = false): Promise<TwoFactorCredential | null> {
    return em.findOne(
      TwoFactorCredential,
      { user: userId },
      { populate: ['secret', 'pendingSecret'], ...(lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}) },
    );
  }

  createCredential(tx: Em, c: { id: string; now: Date; userId: string; pendingSecret: string }): void {
    tx.create(TwoFactorCredential, {
      id: c.id,
      createdAt: c.now,
      updatedAt: c.now,
      user: tx.getReference(User, c.userId),
      secret: null,
      pendingSecret: c.pendingSecret,
      lastStep: null,
      enabledAt: null,
    });
  }

  removeCredential(tx: Em, cred: TwoFactorCredential): void {
    tx.remove(cred);
  }

  async claimStep(tx: Em, credentialId: string, step: number, now: Date): Promise<boolean> {
    const claimed = await tx.nativeUpdate(
      TwoFactorCredential,
      { id: credentialId, $or: [{ lastStep: null }, { lastStep: { $lt: step } }] },
      { lastStep: step, updatedAt: now },
    );
    return claimed === 1;
  }

  async useRecoveryCode(tx: Em, userId: string, codeHash: string, now: Date): Promise<boolean> {
    const used = await tx.nativeUpdate(
      RecoveryCode,
      { user: userId, codeHash, usedAt: null },
      { usedAt: now, updatedAt: now },
    );
    return used === 1;
  }

  async deleteRecoveryCodes(tx: Em, userId: string): Promise<void> {
    await tx.nativeDelete(RecoveryCode, { user: userId });
  }

  addRecoveryCodes(tx: Em, user: User, codes: readonly { id: string; codeHash: string }[], now: Date): void {
    for (const code of codes) {
      tx.create(RecoveryCode, {
        id: code.id,
        createdAt: now,
        updatedAt: now,
        user,
        codeHash: code.codeHash,
        usedAt: null,
      });
    }
  }

  createLoginChallenge(em: Em, c: NewLoginChallenge): LoginChallenge {
    return em.create(LoginChallenge, {
      id: c.id,
      createdAt: c.now,
      updatedAt: c.now,
      user: c.user,
      tokenHash: c.tokenHash,
      expiresAt: c.expiresAt,
      failures: 0,
      closedAt: null,
    });
  }

  findLoginChallenge(em: Em, tokenHash: string): Promise<LoginChallenge | null> {
    return em.findOne(LoginChallenge, { tokenHash }, { populate: ['user.organization'] });
  }

  lockOpenChallenge(tx: Em, id: string): Promise<LoginChallenge | null> {
    return tx.findOne(LoginChallenge, { id, closedAt: null }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  }

  async deleteLoginChallenges(tx: Em, userId: string): Promise<void> {
    await tx.nativeDelete(LoginChallenge, { user: userId });
  }

  purgeLoginChallenges(cutoff: Date): Promise<number> {
    return this.fork().nativeDelete(LoginChallenge, { expiresAt: { $lt: cutoff } });
  }
}
