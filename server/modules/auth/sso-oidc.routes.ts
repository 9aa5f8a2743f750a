import type { AuditRequest } from '../../events/audit.js';
import type { AppDeps } from '../../kit/deps.js';
import type { ModuleHttpRoute } from '../../kit/module.js';
import { decryptSecret } from '../../lib/crypto.js';
import { ssoServiceProvider } from './sso.dto.js';
import { SsoFailure } from './sso-errors.js';
import { oidcCallback } from './sso-oidc.js';
import { ssoRepositoryOf } from './sso.repository.js';
import { consumeSsoState, finishSignIn, ssoFailureAnswer, type SsoAnswer } from './sso-sign-in.service.js';

/** The query of the callback as the IdP wrote it (a repeated name kept repeated: the checks refuse it). */
function searchOf(query: Record<string, unknown>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    for (const v of Array.isArray(value) ? value : [value]) {
      if (typeof v === 'string') params.append(name, v);
    }
  }
  return params.toString();
}

/**
 * The OIDC callback (docs/sso.md, "Signing in"): the IdP sends the browser back with `code` and `state` (or `error`).
 * The sign-in of `state` is used up first (once, within 10 minutes), then the code is exchanged and the ID token
 * checked against the organization's connection (sso-oidc.ts) with the sign-in's nonce and PKCE verifier, and the
 * identity handed to finishSignIn. Every refusal is an answer to the browser: `return_to?error=…` or a page.
 */
async function callback(
  deps: AppDeps,
  query: Record<string, unknown>,
  request: AuditRequest,
): Promise<SsoAnswer> {
  let returnTo: string | null = null;
  try {
    const state = query.state;
    const signIn = await consumeSsoState(deps, state);
    returnTo = signIn.returnTo ?? null;
    if (signIn.protocol !== 'oidc' || typeof state !== 'string' || !signIn.nonce || !signIn.codeVerifier) {
      throw new SsoFailure(
        'SSO_STATE_INVALID',
        'This sign-in did not go through an OpenID Connect identity provider: start again',
      );
    }
    const organizationId = signIn.organization.id;
    const sso = ssoRepositoryOf(deps);
    const connection = await sso.findConnection(sso.fork(), organizationId, { withSecret: true });
    if (
      !connection ||
      connection.protocol !== 'oidc' ||
      !connection.issuer ||
      !connection.clientId ||
      !connection.clientSecret
    ) {
      throw new SsoFailure(
        'SSO_STATE_INVALID',
        'Single sign-on by OpenID Connect is no longer set up for this organization: sign in another way',
      );
    }
    const sp = ssoServiceProvider(deps.config.publicBaseUrl, organizationId);
    const currentUrl = new URL(sp.redirectUri);
    currentUrl.search = searchOf(query);
    const identity = await oidcCallback(
      {
        issuer: connection.issuer,
        clientId: connection.clientId,
        clientSecret: decryptSecret(deps.keys.secrets, connection.clientSecret),
        redirectUri: sp.redirectUri,
        allowInsecure: deps.config.webhook.allowPrivateTargets,
      },
      currentUrl,
      { state, nonce: signIn.nonce, codeVerifier: signIn.codeVerifier },
    );
    return await finishSignIn(
      deps,
      signIn,
      {
        email: identity.email,
        emailVerified: identity.emailVerified,
        ...(identity.name ? { name: identity.name } : {}),
      },
      { request },
    );
  } catch (err) {
    if (err instanceof SsoFailure) {
      if (err.code === 'SSO_IDP_ERROR' || err.code === 'SSO_ASSERTION_INVALID') {
        deps.log.warn(
          { err: err.cause ?? err, code: err.code },
          'single sign-on: OpenID Connect callback refused',
        );
      }
      return ssoFailureAnswer(returnTo, err);
    }
    throw err;
  }
}

/** The public route of OpenID Connect sign-in (no token): the IdP's redirect back to the API. */
export const oidcHttpRoutes: ModuleHttpRoute[] = [
  {
    method: 'GET',
    path: '/auth/sso/oidc/callback',
    async handler(deps, req) {
      return callback(deps, req.query, { requestId: req.requestId, ip: req.ip, userAgent: req.userAgent });
    },
  },
];
