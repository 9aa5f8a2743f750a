import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { ASSIGNABLE_ROLES, User } from '../../access/user.entity.js';
import { BaseSchema } from '../../db/base.entity.js';

/** The sign-in protocols an organization's identity provider may speak (docs/sso.md). */
export const SSO_PROTOCOLS = ['oidc', 'saml'] as const;
export type SsoProtocol = (typeof SSO_PROTOCOLS)[number];

/**
 * An organization's one connection to its identity provider (docs/sso.md): OpenID Connect (`issuer`, `clientId`,
 * `clientSecret`, encrypted at rest) or SAML (`idpEntityId`, `idpSsoUrl`, `idpCertificate`). The fields of the other
 * protocol are null. `updatedAt` follows the app clock and real changes only (set where the row changes).
 */
export const SsoConnectionSchema = defineEntity({
  name: 'SsoConnection',
  tableName: 'sso_connections',
  extends: BaseSchema,
  properties: {
    organization: () => p.manyToOne(Organization).unique().deleteRule('cascade'),
    protocol: p.enum(SSO_PROTOCOLS),
    issuer: p.string().length(2048).nullable(),
    clientId: p.string().length(512).nullable(),
    /** Encrypted with the `secrets` key (`encryptSecret`, lib/crypto.ts); never shown. */
    clientSecret: p.text().nullable().hidden().lazy(),
    idpEntityId: p.string().length(2048).nullable(),
    idpSsoUrl: p.string().length(2048).nullable(),
    /** The IdP's signing certificate, PEM. */
    idpCertificate: p.text().nullable(),
    /** The role of a user made at first sign-in (never `owner`). */
    defaultRole: p.enum(ASSIGNABLE_ROLES).default('member'),
    /** When true, the organization's users but its owner sign in through the IdP only. */
    enforced: p.boolean().default(false),
    updatedAt: p.datetime(3).columnType('timestamptz(3)'),
  },
});
export class SsoConnection extends SsoConnectionSchema.class {}
SsoConnectionSchema.setClass(SsoConnection);

/**
 * A domain whose addresses sign in through the organization's connection, once verified by a TXT record
 * (docs/sso.md). Lower-cased. A verified domain belongs to one organization of the whole platform; pending claims
 * do not count.
 */
export const SsoDomainSchema = defineEntity({
  name: 'SsoDomain',
  tableName: 'sso_domains',
  extends: BaseSchema,
  uniques: [
    { name: 'sso_domains_organization_id_domain_unique', properties: ['organization', 'domain'] },
    {
      name: 'sso_domains_verified_domain_unique',
      expression:
        'create unique index "sso_domains_verified_domain_unique" on "sso_domains" ("domain") where "verified_at" is not null',
    },
  ],
  properties: {
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    domain: p.string().length(253),
    /** The value of the TXT record that proves the domain is the organization's. */
    token: p.string().length(64),
    /** When the TXT record was found (sign-ins route through it from then on); null while pending. */
    verifiedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class SsoDomain extends SsoDomainSchema.class {}
SsoDomainSchema.setClass(SsoDomain);

/**
 * A sign-in sent to the IdP and not yet back (docs/sso.md): its `state` (given once, stored as its SHA-256), the
 * OIDC `nonce` and PKCE `codeVerifier`, or the SAML AuthnRequest's ID (`requestId`, matched against
 * `InResponseTo`). Good for ten minutes and one use.
 */
export const SsoSignInSchema = defineEntity({
  name: 'SsoSignIn',
  tableName: 'sso_sign_ins',
  extends: BaseSchema,
  properties: {
    organization: () => p.manyToOne(Organization).index().deleteRule('cascade'),
    stateHash: p.string().length(64).unique().hidden(),
    protocol: p.enum(SSO_PROTOCOLS),
    nonce: p.string().length(128).nullable().hidden(),
    codeVerifier: p.string().length(128).nullable().hidden(),
    /** Where the callback sends the code (a loopback or allowed origin); null: a page shows it. */
    returnTo: p.string().length(2048).nullable(),
    requestId: p.string().length(256).nullable(),
    expiresAt: p.datetime(3).columnType('timestamptz(3)').index(),
    usedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class SsoSignIn extends SsoSignInSchema.class {}
SsoSignInSchema.setClass(SsoSignIn);

/**
 * The one-time code a finished sign-in hands the client (`POST /auth/sso/token`), stored as its SHA-256: good for
 * 60 seconds and one use.
 */
export const SsoCodeSchema = defineEntity({
  name: 'SsoCode',
  tableName: 'sso_codes',
  extends: BaseSchema,
  properties: {
    user: () => p.manyToOne(User).index().deleteRule('cascade'),
    organization: () => p.manyToOne(Organization).index().deleteRule('cascade'),
    codeHash: p.string().length(64).unique().hidden(),
    expiresAt: p.datetime(3).columnType('timestamptz(3)').index(),
    usedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class SsoCode extends SsoCodeSchema.class {}
SsoCodeSchema.setClass(SsoCode);

/**
 * The SAML assertions an organization accepted, until their `NotOnOrAfter`: an assertion ID seen again is a replay
 * and is refused.
 */
export const SsoAssertionSchema = defineEntity({
  name: 'SsoAssertion',
  tableName: 'sso_assertions',
  indexes: [{ name: 'sso_assertions_expires_at_index', properties: ['expiresAt'] }],
  properties: {
    organization: () => p.manyToOne(Organization).primary().deleteRule('cascade'),
    assertionId: p.string().length(256).primary(),
    expiresAt: p.datetime(3).columnType('timestamptz(3)'),
    createdAt: p.datetime(3).columnType('timestamptz(3)'),
  },
});
export class SsoAssertion extends SsoAssertionSchema.class {}
SsoAssertionSchema.setClass(SsoAssertion);
