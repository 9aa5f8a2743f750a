import { LockMode } from '@mikro-orm/core';
import { User } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import type { EventDefinition } from '../../events/define-event.js';
import type { AppDeps } from '../../kit/deps.js';
import { MikroOrmRepository } from '../../kit/repository.js';
import { newId } from '../../lib/ids.js';
import { runtimeOf } from '../../kit/runtime.js';
import {
  SsoAssertion,
  SsoAssertionSchema,
  SsoCode,
  SsoCodeSchema,
  SsoConnection,
  SsoConnectionSchema,
  SsoDomain,
  SsoDomainSchema,
  SsoSignIn,
  SsoSignInSchema,
  type SsoProtocol,
} from './sso.entity.js';

/**
 * Every read and write of single sign-on (docs/sso.md): the organization's connection and domains, sign-ins in
 * progress, their one-time codes, and the SAML replay cache. Like the module's {@link AuthRepository}, the unit of
 * work (`em`, or the `tx` of a transaction) comes first on every method; the process gets the MikroORM one from the
 * auth module's `create` (`ssoRepositoryOf(deps)`).
 */

/** The tables of single sign-on, from their entities. */
export const SSO_TABLES = {
  connections: SsoConnectionSchema.tableName,
  domains: SsoDomainSchema.tableName,
  signIns: SsoSignInSchema.tableName,
  codes: SsoCodeSchema.tableName,
  assertions: SsoAssertionSchema.tableName,
} as const;

/** What a new connection row holds (`clientSecret` already encrypted with the `secrets` key). */
export interface NewSsoConnection {
  id: string;
  now: Date;
  organizationId: string;
  protocol: SsoProtocol;
  issuer: string | null;
  clientId: string | null;
  clientSecret: string | null;
  idpEntityId: string | null;
  idpSsoUrl: string | null;
  idpCertificate: string | null;
  defaultRole: SsoConnection['defaultRole'];
  enforced: boolean;
}

/** What a new sign-in row holds (the state is given once; only its hash is kept). */
export interface NewSsoSignIn {
  id: string;
  now: Date;
  organizationId: string;
  stateHash: string;
  protocol: SsoProtocol;
  nonce: string | null;
  codeVerifier: string | null;
  returnTo: string | null;
  requestId: string | null;
  expiresAt: Date;
}

/** What a new one-time code row holds (only its hash is kept). */
export interface NewSsoCode {
  id: string;
  now: Date;
  user: User;
  codeHash: string;
  expiresAt: Date;
}

/** Where a sign-in of an email's domain goes: the organization that verified the domain, and its connection. */
export interface SsoSignInRoute {
  organizationId: string;
  /** With its organization (plan, deletion) and its encrypted client secret. */
  connection: SsoConnection;
}

/** How many expired rows a purge removed, per table. */
export interface SsoPurged {
  signIns: number;
  codes: number;
  assertions: number;
}

export interface SsoRepository {
  // ---------- units of work ----------
  /** A fresh unit of work (the callback and the ACS, which have no request context of the API's). */
  fork(): Em;
  /** Runs `work` in a transaction of `em` (committed when it returns, rolled back when it throws). */
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;
  /** Writes what `em` holds (outside a transaction: rows created on it). */
  flush(em: Em): Promise<void>;
  /** Records a webhook event in `tx` (the transactional outbox). */
  recordEvent<P>(tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, now: Date): void;

  // ---------- connections ----------
  /**
   * The organization's connection with its organization, or null. `withSecret` loads the encrypted client secret;
   * `lock` locks the row (`tx`).
   */
  findConnection(
    em: Em,
    organizationId: string,
    opts?: { withSecret?: boolean; lock?: boolean },
  ): Promise<SsoConnection | null>;
  /** A new connection in the unit of work (written at commit). */
  createConnection(tx: Em, c: NewSsoConnection): SsoConnection;
  /** Writes the changes made to `connection` (or the new one) at the next flush or commit. */
  saveConnection(tx: Em, connection: SsoConnection): void;
  /** Deletes the organization's connection and its domains; false when it had none. */
  deleteConnection(tx: Em, organizationId: string): Promise<boolean>;

  // ---------- domains ----------
  /** The organization's domains, by name. */
  listDomains(em: Em, organizationId: string): Promise<SsoDomain[]>;
  /**
   * Makes the organization's domains exactly `domains` (lower-cased by the caller): a kept domain keeps its token and
   * its verification, a new one starts pending with `newToken()`, the others are deleted. Returns the list by name.
   */
  replaceDomains(
    tx: Em,
    organizationId: string,
    domains: readonly string[],
    now: Date,
    newToken: () => string,
  ): Promise<SsoDomain[]>;
  /** The organization that verified `domain`, other than `exceptOrganizationId`; null when none did. */
  domainVerifiedElsewhere(em: Em, domain: string, exceptOrganizationId: string): Promise<string | null>;
  /**
   * Marks the organization's `domain` verified at `now` (kept if it already is); false when the organization has no
   * such domain. Another organization's verification of the same domain makes the unique index refuse it: the
   * error reaches the caller (and the API answers 409 CONFLICT).
   */
  markDomainVerified(tx: Em, organizationId: string, domain: string, now: Date): Promise<boolean>;
  /** True when `domain` is a verified domain of the organization. */
  isVerifiedDomainOf(em: Em, organizationId: string, domain: string): Promise<boolean>;
  /** Where a sign-in of `domain` goes: its verifying organization and that one's connection; null when none. */
  findSignInRouteByEmailDomain(em: Em, domain: string): Promise<SsoSignInRoute | null>;
  /** The organization whose connection is enforced and which verified `domain`, with its connection; or null. */
  findEnforcedConnectionByDomain(em: Em, domain: string): Promise<SsoConnection | null>;

  // ---------- users of a sign-in ----------
  /** The organization's user of `email` (not deleted), its row locked (`tx`), with its organization; or null. */
  lockOrganizationUser(tx: Em, organizationId: string, email: string): Promise<User | null>;
  /** True when the organization removed a user of `email`. */
  removedUserExists(em: Em, organizationId: string, email: string): Promise<boolean>;

  // ---------- sign-ins in progress ----------
  createSignIn(tx: Em, s: NewSsoSignIn): SsoSignIn;
  /**
   * Uses up the sign-in of `stateHash` if it is unused and unexpired at `now` (its row locked, `usedAt` set in `tx`);
   * null otherwise (unknown, used, expired).
   */
  consumeSignIn(tx: Em, stateHash: string, now: Date): Promise<SsoSignIn | null>;

  // ---------- one-time codes ----------
  createCode(tx: Em, c: NewSsoCode): SsoCode;
  /**
   * Uses up the code of `codeHash` if it is unused and unexpired at `now` (`usedAt` set in `tx`), with its user and
   * the user's organization; null otherwise.
   */
  consumeCode(tx: Em, codeHash: string, now: Date): Promise<SsoCode | null>;

  // ---------- SAML replay cache ----------
  /**
   * Records that the organization accepted the assertion `assertionId` (kept until `expiresAt`); false when it was
   * seen already (a replay).
   */
  rememberAssertion(
    tx: Em,
    organizationId: string,
    assertionId: string,
    expiresAt: Date,
    now: Date,
  ): Promise<boolean>;

  // ---------- housekeeping ----------
  /** Deletes sign-ins, codes and remembered assertions that expired before `cutoff`. */
  purgeExpired(cutoff: Date): Promise<SsoPurged>;
}

/** Single sign-on's data access, as the auth module's `create` built it for this process. */
export function ssoRepositoryOf(deps: AppDeps): SsoRepository {
  return runtimeOf(deps, 'auth').sso;
}

/** What deleting an organization removes of single sign-on's tables (part of the manifest's `organizationRows`). */
export const SSO_ORGANIZATION_ROWS = [
  { table: SSO_TABLES.codes },
  { table: SSO_TABLES.signIns },
  { table: SSO_TABLES.assertions },
  { table: SSO_TABLES.domains },
  { table: SSO_TABLES.connections },
] as const;

// ---------- the MikroORM implementation ----------

const INSERT_ASSERTION = `insert into "${SSO_TABLES.assertions}" ("organization_id", "assertion_id", "expires_at", "created_at")
  values (?, ?, ?, ?) on conflict do nothing returning 1`;

export class MikroOrmSsoRepository extends MikroOrmRepository implements SsoRepository {
  findConnection(
    em: Em,
    organizationId: string,
    opts: { withSecret?: boolean; lock?: boolean } = {},
  ): Promise<SsoConnection | null> {
    return em.findOne(
      SsoConnection,
      { organization: organizationId },
      {
        populate: opts.withSecret ? ['organization', 'clientSecret'] : ['organization'],
        ...(opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}),
      },
    );
  }

  createConnection(tx: Em, c: NewSsoConnection): SsoConnection {
    return tx.create(SsoConnection, {
      id: c.id,
      createdAt: c.now,
      updatedAt: c.now,
      organization: c.organizationId,
      protocol: c.protocol,
      issuer: c.issuer,
      clientId: c.clientId,
      clientSecret: c.clientSecret,
      idpEntityId: c.idpEntityId,
      idpSsoUrl: c.idpSsoUrl,
      idpCertificate: c.idpCertificate,
      defaultRole: c.defaultRole,
      enforced: c.enforced,
    });
  }

  saveConnection(tx: Em, connection: SsoConnection): void {
    tx.persist(connection);
  }

  async deleteConnection(tx: Em, organizationId: string): Promise<boolean> {
    await tx.nativeDelete(SsoDomain, { organization: organizationId });
    return (await tx.nativeDelete(SsoConnection, { organization: organizationId })) > 0;
  }

  listDomains(em: Em, organizationId: string): Promise<SsoDomain[]> {
    return em.find(SsoDomain, { organization: organizationId }, { orderBy: { domain: 'asc' } });
  }

  async replaceDomains(
    tx: Em,
    organizationId: string,
    domains: readonly string[],
    now: Date,
    newToken: () => string,
  ): Promise<SsoDomain[]> {
    const wanted = [...new Set(domains)];
    await tx.nativeDelete(SsoDomain, {
      organization: organizationId,
      ...(wanted.length > 0 ? { domain: { $nin: wanted } } : {}),
    });
    const kept = await tx.find(SsoDomain, { organization: organizationId });
    const have = new Set(kept.map((d) => d.domain));
    const added = wanted
      .filter((domain) => !have.has(domain))
      .map((domain) =>
        tx.create(SsoDomain, {
          id: newId('ssd'),
          createdAt: now,
          updatedAt: now,
          organization: organizationId,
          domain,
          token: newToken(),
          verifiedAt: null,
        }),
      );
    await tx.flush();
    return [...kept, ...added].sort((a, b) => (a.domain < b.domain ? -1 : a.domain > b.domain ? 1 : 0));
  }

  async domainVerifiedElsewhere(
    em: Em,
    domain: string,
    exceptOrganizationId: string,
  ): Promise<string | null> {
    const d = await em.findOne(SsoDomain, {
      domain,
      verifiedAt: { $ne: null },
      organization: { $ne: exceptOrganizationId },
    });
    return d ? d.organization.id : null;
  }

  async markDomainVerified(tx: Em, organizationId: string, domain: string, now: Date): Promise<boolean> {
    const d = await tx.findOne(
      SsoDomain,
      { organization: organizationId, domain },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    if (!d) return false;
    if (d.verifiedAt) return true;
    await tx.nativeUpdate(SsoDomain, { id: d.id }, { verifiedAt: now, updatedAt: now });
    d.verifiedAt = now;
    d.updatedAt = now;
    return true;
  }

  async isVerifiedDomainOf(em: Em, organizationId: string, domain: string): Promise<boolean> {
    return (
      (await em.count(SsoDomain, { organization: organizationId, domain, verifiedAt: { $ne: null } })) > 0
    );
  }

  async findSignInRouteByEmailDomain(em: Em, domain: string): Promise<SsoSignInRoute | null> {
    const d = await em.findOne(SsoDomain, { domain, verifiedAt: { $ne: null } });
    if (!d) return null;
    const connection = await this.findConnection(em, d.organization.id, { withSecret: true });
    return connection ? { organizationId: d.organization.id, connection } : null;
  }

  async findEnforcedConnectionByDomain(em: Em, domain: string): Promise<SsoConnection | null> {
    const d = await em.findOne(SsoDomain, { domain, verifiedAt: { $ne: null } });
    if (!d) return null;
    return em.findOne(
      SsoConnection,
      { organization: d.organization.id, enforced: true },
      { populate: ['organization'] },
    );
  }

  lockOrganizationUser(tx: Em, organizationId: string, email: string): Promise<User | null> {
    return tx.findOne(
      User,
      { organization: organizationId, email, deletedAt: null },
      { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['organization'] },
    );
  }

  async removedUserExists(em: Em, organizationId: string, email: string): Promise<boolean> {
    return (await em.count(User, { organization: organizationId, email, deletedAt: { $ne: null } })) > 0;
  }

  createSignIn(tx: Em, s: NewSsoSignIn): SsoSignIn {
    return tx.create(SsoSignIn, {
      id: s.id,
      createdAt: s.now,
      updatedAt: s.now,
      organization: s.organizationId,
      stateHash: s.stateHash,
      protocol: s.protocol,
      nonce: s.nonce,
      codeVerifier: s.codeVerifier,
      returnTo: s.returnTo,
      requestId: s.requestId,
      expiresAt: s.expiresAt,
      usedAt: null,
    });
  }

  async consumeSignIn(tx: Em, stateHash: string, now: Date): Promise<SsoSignIn | null> {
    const s = await tx.findOne(
      SsoSignIn,
      { stateHash },
      { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['nonce', 'codeVerifier'] },
    );
    if (!s || s.usedAt || s.expiresAt.getTime() <= now.getTime()) return null;
    await tx.nativeUpdate(SsoSignIn, { id: s.id }, { usedAt: now, updatedAt: now });
    s.usedAt = now;
    s.updatedAt = now;
    return s;
  }

  createCode(tx: Em, c: NewSsoCode): SsoCode {
    return tx.create(SsoCode, {
      id: c.id,
      createdAt: c.now,
      updatedAt: c.now,
      user: c.user,
      organization: c.user.organization,
      codeHash: c.codeHash,
      expiresAt: c.expiresAt,
      usedAt: null,
    });
  }

  async consumeCode(tx: Em, codeHash: string, now: Date): Promise<SsoCode | null> {
    const c = await tx.findOne(
      SsoCode,
      { codeHash },
      { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['user.organization'] },
    );
    if (!c || c.usedAt || c.expiresAt.getTime() <= now.getTime()) return null;
    await tx.nativeUpdate(SsoCode, { id: c.id }, { usedAt: now, updatedAt: now });
    c.usedAt = now;
    c.updatedAt = now;
    return c;
  }

  async rememberAssertion(
    tx: Em,
    organizationId: string,
    assertionId: string,
    expiresAt: Date,
    now: Date,
  ): Promise<boolean> {
    const rows: unknown[] = await tx.execute(INSERT_ASSERTION, [organizationId, assertionId, expiresAt, now]);
    return rows.length > 0;
  }

  async purgeExpired(cutoff: Date): Promise<SsoPurged> {
    const em = this.fork();
    return {
      signIns: await em.nativeDelete(SsoSignIn, { expiresAt: { $lt: cutoff } }),
      codes: await em.nativeDelete(SsoCode, { expiresAt: { $lt: cutoff } }),
      assertions: await em.nativeDelete(SsoAssertion, { expiresAt: { $lt: cutoff } }),
    };
  }
}
