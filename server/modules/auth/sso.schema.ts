import { z } from 'zod';
import { ASSIGNABLE_ROLES } from '../../access/user.entity.js';
import {
  DOMAIN_MAX_LENGTH,
  DOMAIN_VERIFICATION_PREFIX,
  domainProblem,
} from '../../lib/domain-verification.js';
import { okResponse } from '../../lib/schema.js';
import { SSO_PROTOCOLS } from './sso.entity.js';
import { MAX_METADATA_CHARS } from './sso-saml.js';

/** Bounds of a connection's fields (docs/sso.md, "The values the IdP needs"); the columns are as long. */
export const SSO_LIMITS = {
  urlLength: 2048,
  clientIdLength: 512,
  clientSecretLength: 1024,
  certificateLength: 64 * 1024,
  domains: 50,
} as const;

// ---------- field rules ----------

/** An email domain of the connection: the rule of a site's custom domain (server/lib/domain-verification.ts). */
export const ZSsoDomain = z
  .string()
  .min(1)
  .max(DOMAIN_MAX_LENGTH)
  .superRefine((v, ctx) => {
    const problem = domainProblem(v);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe(
    'An email domain whose users sign in through the connection: a lower-case host name of at least two labels, ' +
      'at most 253 characters, such as `example.com`',
  );

const ZProtocol = z
  .enum(SSO_PROTOCOLS)
  .describe(
    '`oidc`: OpenID Connect (`issuer`, `client_id`, `client_secret`); `saml`: SAML 2.0 (`metadata_xml`, ' +
      'or `idp_entity_id`, `idp_sso_url` and `idp_certificate`)',
  );

const ZDefaultRole = z
  .enum(ASSIGNABLE_ROLES)
  .describe(
    'The role of a user created at a first sign-in: `member` (the default) or `admin`, never `owner`',
  );

const OIDC_FIELDS = ['issuer', 'client_id', 'client_secret'] as const;
const SAML_FIELDS = ['metadata_xml', 'idp_entity_id', 'idp_sso_url', 'idp_certificate'] as const;
const SAML_PARTS = ['idp_entity_id', 'idp_sso_url', 'idp_certificate'] as const;

/**
 * `PUT /organization/sso`. One object for both protocols (the `/v1` adapter and the OpenAPI document read an input
 * object's shape): `protocol` says which fields belong, and the fields of the other protocol are refused, as a
 * discriminated union would.
 */
export const ZSetSsoInput = z
  .strictObject({
    protocol: ZProtocol,
    issuer: z
      .string()
      .trim()
      .min(1)
      .max(SSO_LIMITS.urlLength)
      .optional()
      .describe(
        'OIDC (required): the issuer URL, `https://`; its discovery document ' +
          '`<issuer>/.well-known/openid-configuration` is fetched and checked when the connection is saved',
      ),
    client_id: z
      .string()
      .trim()
      .min(1)
      .max(SSO_LIMITS.clientIdLength)
      .optional()
      .describe('OIDC (required): the client id the IdP gave the platform'),
    client_secret: z
      .string()
      .min(1)
      .max(SSO_LIMITS.clientSecretLength)
      .optional()
      .describe(
        'OIDC: the client secret the IdP gave the platform. Required when the connection is created or changes ' +
          'protocol; left out, the stored one is kept. Write-only: stored encrypted, never shown',
      ),
    metadata_xml: z
      .string()
      .min(1)
      .max(MAX_METADATA_CHARS)
      .optional()
      .describe(
        'SAML: the IdP’s metadata XML (at most 256 KiB, no DOCTYPE), from which `idp_entity_id`, `idp_sso_url` ' +
          '(HTTP-Redirect binding) and the signing certificates are read. Either this or the three fields',
      ),
    idp_entity_id: z
      .string()
      .trim()
      .min(1)
      .max(SSO_LIMITS.urlLength)
      .optional()
      .describe('SAML without `metadata_xml` (required then): the IdP’s entity ID'),
    idp_sso_url: z
      .string()
      .trim()
      .min(1)
      .max(SSO_LIMITS.urlLength)
      .optional()
      .describe(
        'SAML without `metadata_xml` (required then): the IdP’s single sign-on URL of the HTTP-Redirect binding, ' +
          '`https://`',
      ),
    idp_certificate: z
      .string()
      .min(1)
      .max(SSO_LIMITS.certificateLength)
      .optional()
      .describe(
        'SAML without `metadata_xml` (required then): the IdP’s signing certificate, PEM (or the base64 of its DER)',
      ),
    domains: z
      .array(ZSsoDomain)
      .max(SSO_LIMITS.domains)
      .superRefine((list, ctx) => {
        const seen = new Set<string>();
        list.forEach((d, i) => {
          if (seen.has(d)) ctx.addIssue({ code: 'custom', path: [i], message: 'listed twice' });
          seen.add(d);
        });
      })
      .optional()
      .describe(
        `The email domains the connection signs in (at most ${SSO_LIMITS.domains}), replacing the list: a domain ` +
          'kept keeps its TXT record and its verification, a new one starts `pending`. Left out: unchanged (none ' +
          'for a new connection). A domain another organization verified → 409 `CONFLICT`',
      ),
    default_role: ZDefaultRole.optional().describe(
      'The role of a user created at a first sign-in: `member` or `admin`, never `owner`. Left out: unchanged ' +
        '(`member` for a new connection)',
    ),
    enforced: z
      .boolean()
      .optional()
      .describe(
        'When true, the organization’s users sign in through the IdP only (password login, password reset and ' +
          'two-factor set-up → 403 `SSO_REQUIRED`), except the owner’s password login. Left out: unchanged ' +
          '(false for a new connection)',
      ),
  })
  .superRefine((v, ctx) => {
    const refuse = (fields: readonly string[], why: string) => {
      for (const f of fields) {
        if ((v as Record<string, unknown>)[f] !== undefined)
          ctx.addIssue({ code: 'custom', path: [f], message: why });
      }
    };
    if (v.protocol === 'oidc') {
      refuse(SAML_FIELDS, 'Not a field of an `oidc` connection');
      for (const f of ['issuer', 'client_id'] as const) {
        if (v[f] === undefined) ctx.addIssue({ code: 'custom', path: [f], message: 'Required' });
      }
    } else {
      refuse(OIDC_FIELDS, 'Not a field of a `saml` connection');
      if (v.metadata_xml !== undefined) {
        refuse(SAML_PARTS, 'Give either `metadata_xml` or the IdP’s fields, not both');
      } else {
        for (const f of SAML_PARTS) {
          if (v[f] === undefined) {
            ctx.addIssue({ code: 'custom', path: [f], message: 'Required (or give `metadata_xml`)' });
          }
        }
      }
    }
  })
  .describe('The connection to the organization’s identity provider, by `protocol`');
export type TSetSsoInput = z.infer<typeof ZSetSsoInput>;

/** `PUT /organization/sso` by protocol, as the service takes it (the schema's rule across fields holds). */
export type TSetSsoConnection =
  | (TSetSsoCommon & { protocol: 'oidc'; issuer: string; client_id: string; client_secret?: string })
  | (TSetSsoCommon & { protocol: 'saml'; metadata_xml: string })
  | (TSetSsoCommon & {
      protocol: 'saml';
      metadata_xml?: undefined;
      idp_entity_id: string;
      idp_sso_url: string;
      idp_certificate: string;
    });
type TSetSsoCommon = Pick<TSetSsoInput, 'domains' | 'default_role' | 'enforced'>;

/** `POST /organization/sso/domains/{domain}/verify` */
export const ZVerifySsoDomainInput = z.strictObject({
  // As a path id: anything that is not a domain of the connection is 404 (never 400, docs/api-conventions.md).
  domain: z
    .string()
    .min(1)
    .max(DOMAIN_MAX_LENGTH)
    .describe('A domain of the connection, as `domains[].domain` shows it (case-insensitive)'),
});
export type TVerifySsoDomainInput = z.infer<typeof ZVerifySsoDomainInput>;

// ---------- outputs ----------

const ZTimestamp = z.string().describe('ISO 8601 UTC with milliseconds');

export const ZSsoDomainView = z
  .object({
    domain: z.string().describe('The email domain, lower case'),
    verification: z
      .object({
        status: z
          .enum(['pending', 'verified'])
          .describe(
            '`pending`: sign-ins of the domain do not route yet, publish `record` and verify; `verified`: they do',
          ),
        record: z
          .object({
            type: z.literal('TXT'),
            name: z.string().describe(`\`${DOMAIN_VERIFICATION_PREFIX}.<domain>\``),
            value: z.string().describe('The value to publish: random, made when the domain was added'),
          })
          .describe('The DNS record that proves the domain is the organization’s'),
      })
      .describe(
        'Whether the domain is verified, and the TXT record that verifies it (`POST ' +
          '/organization/sso/domains/{domain}/verify`)',
      ),
  })
  .meta({ id: 'SsoDomain' })
  .describe('An email domain of the connection');
export type TSsoDomainView = z.infer<typeof ZSsoDomainView>;

export const ZSso = z
  .object({
    protocol: z.enum(SSO_PROTOCOLS).describe('`oidc` or `saml`'),
    issuer: z.string().nullable().describe('OIDC: the issuer URL; null for SAML'),
    client_id: z
      .string()
      .nullable()
      .describe('OIDC: the client id; null for SAML. The client secret is never shown'),
    idp_entity_id: z.string().nullable().describe('SAML: the IdP’s entity ID; null for OIDC'),
    idp_sso_url: z
      .string()
      .nullable()
      .describe('SAML: the IdP’s single sign-on URL (HTTP-Redirect binding); null for OIDC'),
    idp_certificate_fingerprint: z
      .string()
      .nullable()
      .describe(
        'SAML: the SHA-256 fingerprint of the IdP’s signing certificate (the first, when the metadata lists ' +
          'several), `AB:CD:…`; null for OIDC',
      ),
    domains: z.array(ZSsoDomainView).describe('The email domains the connection signs in, by name'),
    default_role: z.enum(ASSIGNABLE_ROLES).describe('The role of a user created at a first sign-in'),
    enforced: z
      .boolean()
      .describe('Whether the organization’s users (its owner aside) must sign in through the IdP'),
    redirect_uri: z
      .string()
      .describe(
        'OIDC: the sign-in redirect URI to register at the IdP, `<PUBLIC_BASE_URL>/v1/auth/sso/oidc/callback`',
      ),
    acs_url: z
      .string()
      .describe(
        'SAML: the assertion consumer service URL to register at the IdP, `<PUBLIC_BASE_URL>/v1/auth/sso/saml/acs`',
      ),
    entity_id: z
      .string()
      .describe(
        'SAML: the service provider’s entity ID (the audience of assertions), ' +
          '`<PUBLIC_BASE_URL>/v1/auth/sso/saml/metadata/<organization id>`',
      ),
    metadata_url: z
      .string()
      .describe(
        'SAML: where the service provider’s metadata XML is served (no token): the same address as `entity_id`',
      ),
    created_at: ZTimestamp,
    updated_at: ZTimestamp,
  })
  .meta({ id: 'SsoConnection' })
  .describe('The organization’s single sign-on connection (never its client secret)');
export type TSso = z.infer<typeof ZSso>;

export const ZSsoOutput = okResponse({ sso: ZSso });
export type TSsoOutput = z.infer<typeof ZSsoOutput>;

export const ZDeleteSsoOutput = okResponse({ message: z.string() });
export type TDeleteSsoOutput = z.infer<typeof ZDeleteSsoOutput>;
