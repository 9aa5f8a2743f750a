import type { AuditRequest } from '../../events/audit.js';
import type { AppDeps } from '../../kit/deps.js';
import type { ModuleHttpRoute } from '../../kit/module.js';
import { notFound } from '../../lib/errors.js';
import { ssoServiceProvider } from './sso.dto.js';
import type { SsoConnection } from './sso.entity.js';
import { SsoFailure } from './sso-errors.js';
import { ssoRepositoryOf } from './sso.repository.js';
import { samlValidate, spMetadataXml, type SamlConfig } from './sso-saml.js';
import { consumeSsoState, finishSignIn, ssoFailureAnswer, type SsoAnswer } from './sso-sign-in.service.js';

/** The SAML connection's settings for node-saml: the IdP's from the row, the SP's from PUBLIC_BASE_URL. */
export function samlConfigOf(deps: AppDeps, connection: SsoConnection, organizationId: string): SamlConfig {
  const sp = ssoServiceProvider(deps.config.publicBaseUrl, organizationId);
  return {
    spEntityId: sp.entityId,
    acsUrl: sp.acsUrl,
    idpEntityId: connection.idpEntityId ?? null,
    idpSsoUrl: connection.idpSsoUrl ?? '',
    idpCertificate: connection.idpCertificate ?? '',
  };
}

/** The SP's metadata XML of an organization with a SAML connection (docs/sso.md, "The values the IdP needs"). */
async function metadata(deps: AppDeps, organizationId: string): Promise<string> {
  const sso = ssoRepositoryOf(deps);
  const connection = await sso.findConnection(sso.fork(), organizationId);
  if (!connection || connection.protocol !== 'saml') throw notFound('SAML connection');
  const sp = ssoServiceProvider(deps.config.publicBaseUrl, organizationId);
  return spMetadataXml({ spEntityId: sp.entityId, acsUrl: sp.acsUrl });
}

/**
 * The ACS (docs/sso.md, "SAML"): the IdP's Response posted by the browser (HTTP-POST binding) with the RelayState of
 * the sign-in it answers. The sign-in is used up first (once, within 10 minutes), then the Response is checked
 * against its request and the organization's connection (sso-saml.ts), and the identity handed to finishSignIn,
 * which refuses a replayed assertion ID. Every refusal is an answer to the browser: `return_to?error=…` or a page.
 */
async function acs(deps: AppDeps, body: unknown, request: AuditRequest): Promise<SsoAnswer> {
  const form = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
  let returnTo: string | null = null;
  try {
    const signIn = await consumeSsoState(deps, form.RelayState);
    returnTo = signIn.returnTo ?? null;
    if (signIn.protocol !== 'saml') {
      throw new SsoFailure(
        'SSO_STATE_INVALID',
        'This sign-in did not go through a SAML identity provider: start again',
      );
    }
    const organizationId = signIn.organization.id;
    const sso = ssoRepositoryOf(deps);
    const connection = await sso.findConnection(sso.fork(), organizationId);
    if (!connection || connection.protocol !== 'saml') {
      throw new SsoFailure(
        'SSO_STATE_INVALID',
        'Single sign-on by SAML is no longer set up for this organization: sign in another way',
      );
    }
    const identity = await samlValidate(samlConfigOf(deps, connection, organizationId), form, {
      requestId: signIn.requestId ?? null,
    });
    return await finishSignIn(
      deps,
      signIn,
      { email: identity.email, ...(identity.name ? { name: identity.name } : {}) },
      { assertion: { id: identity.assertionId, notOnOrAfter: identity.notOnOrAfter }, request },
    );
  } catch (err) {
    if (err instanceof SsoFailure) {
      // What the IdP sent did not check out: for the operator, who sees why (the browser gets the message too).
      if (err.code === 'SSO_IDP_ERROR' || err.code === 'SSO_ASSERTION_INVALID') {
        deps.log.warn({ err: err.cause ?? err, code: err.code }, 'single sign-on: SAML response refused');
      }
      return ssoFailureAnswer(returnTo, err);
    }
    throw err;
  }
}

/** The public routes of SAML sign-in (no token): the SP's metadata and the ACS. */
export const samlHttpRoutes: ModuleHttpRoute[] = [
  {
    method: 'GET',
    path: '/auth/sso/saml/metadata/:organization_id',
    async handler(deps, req) {
      return {
        contentType: 'application/samlmetadata+xml; charset=utf-8',
        body: await metadata(deps, req.params.organization_id!),
        headers: { 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' },
      };
    },
  },
  {
    method: 'POST',
    path: '/auth/sso/saml/acs',
    form: true,
    async handler(deps, req) {
      return acs(deps, req.body, { requestId: req.requestId, ip: req.ip, userAgent: req.userAgent });
    },
  },
];
