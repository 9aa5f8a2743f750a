import { SsoDomain } from '../../../server/modules/auth/sso.entity.js';
import type { SecurityFixture } from '../../support/security-fixtures.js';
import type { TestServer } from '../../support/server.js';

/**
 * Security-table fixtures of the SSO connection's procedures that take a path parameter
 * (tests/support/security-fixtures.ts): a connection of `other` (an Enterprise organization) with a domain, whose
 * verification by the caller's organization must be 404. A SAML connection from its three fields: nothing to fetch.
 */
/** A self-signed certificate of the IdP (the SAML connection needs one). */
export const SAML_TEST_CERT = `-----BEGIN CERTIFICATE-----
MIIBfjCCASSgAwIBAgITZ6i3Yf+5YKFGweN4ChNshNK0ATAKBggqhkjOPQQDAjAU
MRIwEAYDVQQDDAl0YWJsZS1pZHAwIBcNMjYxMjA3MjEyMzI0WhgPMjEyNjExMTMy
MTIzMjRaMBQxEjAQBgNVBAMMCXRhYmxlLWlkcDBZMBMGByqGSM49AgEGCCqGSM49
AwEHA0IABD2iBkn97LmhlgmEHqAEWC0lSXkPLZAE+hpDZr6koRtJ9wnpC+ObNOdc
ljyJ87lP/X8p/xP+0U/qXEx9Dk7vWWWjUzBRMB0GA1UdDgQWBBRY0YgDaqIdo96u
mNhUVItwZyk1xDAfBgNVHSMEGDAWgBRY0YgDaqIdo96umNhUVItwZyk1xDAPBgNV
HRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIGy/mcJXsX0Cd59qWMkoF5k7
bcYmI7zor0ScyWOYIsU1AiEA6dmdx9a15AmBEIh2bTnZmaTakY+4NZK0J01JsQDD
7PQ=
-----END CERTIFICATE-----`;

/**
 * A SAML connection of the organization of `token` (an owner's, on Enterprise) with one new domain, made from the IdP's
 * three fields; `verified` marks the domain verified as if its record had been found. Returns the domain.
 */
export async function samlConnectionWithDomain(
  s: TestServer,
  token: string,
  opts: { verified?: boolean } = {},
): Promise<string> {
  const domain = `table-${Math.random().toString(36).slice(2, 10)}.example`;
  await s.caller(token).sso.set({
    protocol: 'saml',
    idp_entity_id: 'urn:table:idp',
    idp_sso_url: 'https://idp.table.example/sso',
    idp_certificate: SAML_TEST_CERT,
    domains: [domain],
  });
  if (opts.verified) {
    await s.deps.db.orm.em
      .fork()
      .nativeUpdate(SsoDomain, { domain, verifiedAt: null }, { verifiedAt: new Date() });
  }
  return domain;
}

export const ssoConnectionsSecurityFixtures: Record<string, SecurityFixture> = {
  'sso.verifyDomain': async ({ s, other }) => ({ domain: await samlConnectionWithDomain(s, other.token) }),
};
