import { verificationRecord } from '../../lib/domain-verification.js';
import type { SsoConnection, SsoDomain } from './sso.entity.js';
import { certificateFingerprint, splitCertificates } from './sso-saml.js';
import type { TSso, TSsoDomainView } from './sso.schema.js';

/** The service provider's addresses (docs/sso.md, "The values the IdP needs"), from `PUBLIC_BASE_URL`. */
export interface SsoServiceProvider {
  redirectUri: string;
  acsUrl: string;
  entityId: string;
  metadataUrl: string;
}

/** The SP values of `organizationId` under `publicBaseUrl` (no trailing slash). */
export function ssoServiceProvider(publicBaseUrl: string, organizationId: string): SsoServiceProvider {
  const metadata = `${publicBaseUrl}/v1/auth/sso/saml/metadata/${organizationId}`;
  return {
    redirectUri: `${publicBaseUrl}/v1/auth/sso/oidc/callback`,
    acsUrl: `${publicBaseUrl}/v1/auth/sso/saml/acs`,
    entityId: metadata,
    metadataUrl: metadata,
  };
}

export function toSsoDomainDto(d: Pick<SsoDomain, 'domain' | 'token' | 'verifiedAt'>): TSsoDomainView {
  return {
    domain: d.domain,
    verification: {
      status: d.verifiedAt ? 'verified' : 'pending',
      record: verificationRecord(d.domain, d.token),
    },
  };
}

/** The connection as the API shows it: never its client secret. */
export function toSsoDto(c: SsoConnection, domains: readonly SsoDomain[], sp: SsoServiceProvider): TSso {
  const [certificate] = c.idpCertificate ? splitCertificates(c.idpCertificate) : [];
  return {
    protocol: c.protocol,
    issuer: c.issuer ?? null,
    client_id: c.clientId ?? null,
    idp_entity_id: c.idpEntityId ?? null,
    idp_sso_url: c.idpSsoUrl ?? null,
    idp_certificate_fingerprint: certificate ? certificateFingerprint(certificate) : null,
    domains: [...domains].sort((a, b) => (a.domain < b.domain ? -1 : 1)).map(toSsoDomainDto),
    default_role: c.defaultRole,
    enforced: c.enforced,
    redirect_uri: sp.redirectUri,
    acs_url: sp.acsUrl,
    entity_id: sp.entityId,
    metadata_url: sp.metadataUrl,
    created_at: c.createdAt.toISOString(),
    updated_at: c.updatedAt.toISOString(),
  };
}
