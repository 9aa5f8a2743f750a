import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { loadOrganizationView } from '../../access/organization.dto.js';
import { organizationUpdated } from '../../access/organization.events.js';
import type { Organization } from '../../access/organization.entity.js';
import type { Em } from '../../db/orm.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import { assertPlanFeature } from '../../kit/plan-limit.js';
import { encryptSecret } from '../../lib/crypto.js';
import {
  checkDomainRecord,
  domainNotVerifiedError,
  newVerificationToken,
} from '../../lib/domain-verification.js';
import { conflict, notFound, validation } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { authRepositoryOf } from './auth.repository.js';
import { discoverIssuer } from './sso-oidc.js';
import { checkIdpSsoUrl, normalizeIdpCertificate, parseIdpMetadata } from './sso-saml.js';
import { ssoServiceProvider, toSsoDto } from './sso.dto.js';
import type { SsoConnection } from './sso.entity.js';
import { ssoRepositoryOf, type SsoRepository } from './sso.repository.js';
import type {
  TDeleteSsoOutput,
  TSetSsoConnection,
  TSetSsoInput,
  TSsoOutput,
  TVerifySsoDomainInput,
} from './sso.schema.js';

/**
 * The organization's single sign-on connection (docs/sso.md): read by owners and admins, changed by the owner, on the
 * Enterprise plan only (402 below it, before anything else). Every change is one transaction that also records
 * `organization.updated`; the audit entry is the mutation's own (server/events/audit.ts).
 */

const connectionNotFound = () => notFound('SSO connection');

/** An `http://` loopback issuer or IdP only where private targets are allowed (never in production, config.ts). */
const allowInsecure = (deps: AppDeps) => deps.config.webhook.allowPrivateTargets;

const domainTaken = (domain: string, path: string) =>
  conflict(`The domain ${domain} is already verified by another organization`, [
    { path, message: 'Already verified by another organization' },
  ]);

/** Whether `err` is the unique index `index` refusing a row. */
function isUniqueClash(err: unknown, index: string): boolean {
  const e = err as { code?: unknown; constraint?: unknown; message?: unknown } | null;
  if (!e) return false;
  const unique = err instanceof UniqueConstraintViolationException || e.code === '23505';
  return unique && `${String(e.constraint)} ${String(e.message)}`.includes(index);
}
/** A second organization's verification of a verified domain. */
const isVerifiedDomainClash = (err: unknown) => isUniqueClash(err, 'sso_domains_verified_domain_unique');
/**
 * Two first PUTs of one organization at once: both found no connection and one insert lost (the first committed),
 * or both added the same new domain. Running the change again applies it over the other's.
 */
const isConcurrentSetClash = (err: unknown) =>
  isUniqueClash(err, 'sso_connections_organization_id_unique') ||
  isUniqueClash(err, 'sso_domains_organization_id_domain_unique');

async function ssoOutput(
  ctx: Pick<ActorContext, 'deps' | 'actor'>,
  em: Em,
  repository: SsoRepository,
  c: SsoConnection,
): Promise<TSsoOutput> {
  const domains = await repository.listDomains(em, ctx.actor.organizationId);
  const sp = ssoServiceProvider(ctx.deps.config.publicBaseUrl, ctx.actor.organizationId);
  return { success: true, sso: toSsoDto(c, domains, sp) };
}

/** The organization's plan under a share lock (a plan change waits for the change), checked again. */
async function lockEnterpriseOrganization(ctx: ActorContext, tx: Em): Promise<Organization> {
  const org = await authRepositoryOf(ctx.deps).lockOrganizationShared(tx, ctx.actor.organizationId);
  if (!org) throw notFound('Organization');
  assertPlanFeature(org, 'sso');
  return org;
}

function recordOrganizationUpdated(
  repository: SsoRepository,
  tx: Em,
  org: Organization,
  now: Date,
): Promise<void> {
  return loadOrganizationView(tx, org).then((view) =>
    repository.recordEvent(tx, organizationUpdated, view, org.id, now),
  );
}

/** `GET /organization/sso`: owner and admin. */
export async function getSso(ctx: ActorContext): Promise<TSsoOutput> {
  assertPlanFeature(ctx.actor, 'sso');
  const repository = ssoRepositoryOf(ctx.deps);
  const c = await repository.findConnection(ctx.em, ctx.actor.organizationId);
  if (!c) throw connectionNotFound();
  return ssoOutput(ctx, ctx.em, repository, c);
}

/** What a PUT stores of the IdP, checked: discovery for OIDC, the metadata or the three fields for SAML. */
interface IdpValues {
  issuer: string | null;
  clientId: string | null;
  idpEntityId: string | null;
  idpSsoUrl: string | null;
  idpCertificate: string | null;
}

/**
 * Checks the IdP's values (network for OIDC: the discovery document; bounded in time), outside any transaction.
 * Every failure is a 400 naming the field.
 */
async function checkedIdpValues(deps: AppDeps, input: TSetSsoConnection): Promise<IdpValues> {
  const insecure = allowInsecure(deps);
  if (input.protocol === 'oidc') {
    await discoverIssuer(input.issuer, { allowInsecure: insecure });
    return {
      issuer: input.issuer,
      clientId: input.client_id,
      idpEntityId: null,
      idpSsoUrl: null,
      idpCertificate: null,
    };
  }
  if (input.metadata_xml !== undefined) {
    const metadata = parseIdpMetadata(input.metadata_xml, { allowInsecure: insecure });
    return {
      issuer: null,
      clientId: null,
      idpEntityId: metadata.entityId,
      idpSsoUrl: metadata.ssoUrl,
      idpCertificate: metadata.certificates.join(''),
    };
  }
  return {
    issuer: null,
    clientId: null,
    idpEntityId: input.idp_entity_id,
    idpSsoUrl: checkIdpSsoUrl(input.idp_sso_url, { allowInsecure: insecure }),
    idpCertificate: normalizeIdpCertificate(input.idp_certificate),
  };
}

const secretRequired = () =>
  validation('client_secret', 'Required when the connection is created or changes protocol to `oidc`');

/**
 * `PUT /organization/sso` (owner): creates or replaces the connection. Fields left out keep their values
 * (`client_secret`, `domains`, `default_role`, `enforced`); the other protocol's fields are cleared. `domains`
 * replaces the list: kept domains keep their token and verification, new ones start pending; a domain another
 * organization verified is 409.
 */
export async function setSso(ctx: ActorContext, input: TSetSsoInput): Promise<TSsoOutput> {
  const { deps, actor } = ctx;
  assertPlanFeature(actor, 'sso');
  // The schema's rule across fields makes the input one of the protocols' shapes.
  const wanted = input as TSetSsoConnection;
  const repository = ssoRepositoryOf(deps);
  // A secret that cannot be found is refused before the IdP is asked anything.
  if (wanted.protocol === 'oidc' && wanted.client_secret === undefined) {
    const current = await repository.findConnection(ctx.em, actor.organizationId, { withSecret: true });
    if (current?.protocol !== 'oidc' || !current.clientSecret) throw secretRequired();
  }
  const idp = await checkedIdpValues(deps, wanted);
  const secret =
    wanted.protocol === 'oidc' && wanted.client_secret !== undefined
      ? encryptSecret(deps.keys.secrets, wanted.client_secret)
      : undefined;
  const domains = wanted.domains;
  const change = () =>
    repository.transaction(ctx.em, async (tx) => {
      const org = await lockEnterpriseOrganization(ctx, tx);
      const now = deps.clock.now();
      let c = await repository.findConnection(tx, org.id, { lock: true, withSecret: true });
      const clientSecret =
        wanted.protocol !== 'oidc' ? null : (secret ?? (c?.protocol === 'oidc' ? c.clientSecret : null));
      if (wanted.protocol === 'oidc' && !clientSecret) throw secretRequired();
      if (domains) {
        for (const [i, domain] of domains.entries()) {
          if (await repository.domainVerifiedElsewhere(tx, domain, org.id))
            throw domainTaken(domain, `domains.${i}`);
        }
      }
      if (!c) {
        c = repository.createConnection(tx, {
          id: newId('sso'),
          now,
          organizationId: org.id,
          protocol: wanted.protocol,
          ...idp,
          clientSecret: clientSecret ?? null,
          defaultRole: wanted.default_role ?? 'member',
          enforced: wanted.enforced ?? false,
        });
      } else {
        c.protocol = wanted.protocol;
        c.issuer = idp.issuer;
        c.clientId = idp.clientId;
        c.clientSecret = clientSecret ?? null;
        c.idpEntityId = idp.idpEntityId;
        c.idpSsoUrl = idp.idpSsoUrl;
        c.idpCertificate = idp.idpCertificate;
        if (wanted.default_role !== undefined) c.defaultRole = wanted.default_role;
        if (wanted.enforced !== undefined) c.enforced = wanted.enforced;
        c.updatedAt = now;
        repository.saveConnection(tx, c);
      }
      await repository.flush(tx);
      if (domains) await repository.replaceDomains(tx, org.id, domains, now, newVerificationToken);
      await recordOrganizationUpdated(repository, tx, org, now);
      return ssoOutput(ctx, tx, repository, c);
    });
  try {
    return await change();
  } catch (err) {
    if (!isConcurrentSetClash(err)) throw err;
    return change();
  }
}

/** `DELETE /organization/sso` (owner): the connection and its domains go; enforcement ends with them. */
export async function deleteSso(ctx: ActorContext): Promise<TDeleteSsoOutput> {
  assertPlanFeature(ctx.actor, 'sso');
  const repository = ssoRepositoryOf(ctx.deps);
  await repository.transaction(ctx.em, async (tx) => {
    const org = await lockEnterpriseOrganization(ctx, tx);
    if (!(await repository.deleteConnection(tx, org.id))) throw connectionNotFound();
    await recordOrganizationUpdated(repository, tx, org, ctx.deps.clock.now());
  });
  return { success: true, message: 'SSO connection deleted' };
}

/**
 * `POST /organization/sso/domains/{domain}/verify` (owner): the TXT record `_cloud-platform.<domain>` must hold the
 * domain's token (server/lib/domain-verification.ts, as a site's custom domain). The lookup runs outside any
 * transaction; the domain is then marked in one, and the partial unique index of verified domains settles a race
 * with another organization (409). A verified domain answers at once, unchanged.
 */
export async function verifySsoDomain(ctx: ActorContext, input: TVerifySsoDomainInput): Promise<TSsoOutput> {
  const { deps, actor } = ctx;
  assertPlanFeature(actor, 'sso');
  const repository = ssoRepositoryOf(deps);
  const c = await repository.findConnection(ctx.em, actor.organizationId);
  if (!c) throw connectionNotFound();
  const wanted = input.domain.toLowerCase();
  const domain = (await repository.listDomains(ctx.em, actor.organizationId)).find(
    (d) => d.domain === wanted,
  );
  if (!domain) throw notFound('Domain');
  if (domain.verifiedAt) return ssoOutput(ctx, ctx.em, repository, c);
  if (await repository.domainVerifiedElsewhere(ctx.em, domain.domain, actor.organizationId)) {
    throw domainTaken(domain.domain, 'domain');
  }
  const check = await checkDomainRecord(deps.config.dnsServers, domain.domain, domain.token);
  if (!check.ok) throw domainNotVerifiedError(domain.domain, check);
  try {
    return await repository.transaction(ctx.em, async (tx) => {
      const org = await lockEnterpriseOrganization(ctx, tx);
      const now = deps.clock.now();
      const locked = await repository.findConnection(tx, org.id, { lock: true });
      // Removed, or removed and added again (a new token), while the record was looked up: verify again.
      const current =
        locked && (await repository.listDomains(tx, org.id)).find((d) => d.domain === domain.domain);
      if (!locked || !current || current.token !== domain.token) {
        throw conflict('The domain changed while it was being verified: verify again', [
          { path: 'domain', message: 'Changed during the verification' },
        ]);
      }
      if (!current.verifiedAt) {
        if (await repository.domainVerifiedElsewhere(tx, domain.domain, org.id)) {
          throw domainTaken(domain.domain, 'domain');
        }
        await repository.markDomainVerified(tx, org.id, domain.domain, now);
        await recordOrganizationUpdated(repository, tx, org, now);
      }
      return ssoOutput(ctx, tx, repository, locked);
    });
  } catch (err) {
    if (isVerifiedDomainClash(err)) throw domainTaken(domain.domain, 'domain');
    throw err;
  }
}
