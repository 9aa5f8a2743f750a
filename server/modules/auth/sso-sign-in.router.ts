import { authEndpointProcedure } from '../../trpc/procedures.js';
import { ZLoginOutput } from './auth.schema.js';
import { ZSsoStartInput, ZSsoStartOutput, ZSsoTokenInput } from './sso-sign-in.schema.js';
import * as ssoSignIn from './sso-sign-in.service.js';

const tags = ['Authentication'];

/**
 * `POST /auth/sso/start` and `POST /auth/sso/token` (docs/sso.md, "Signing in"): unauthenticated, with the per-address
 * limits of `POST /auth/login`. Spread into the `sso` router (sso.router.ts).
 */
export const ssoSignInProcedures = {
  start: authEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/sso/start',
        tags,
        summary: 'Start a single sign-on',
        description:
          'Routes the email to the organization that verified its domain (an `enterprise` organization with a ' +
          'single sign-on connection) and answers `authorization_url`, the identity provider’s address to open in ' +
          'a browser. The IdP sends the browser back to `GET /auth/sso/oidc/callback` or `POST /auth/sso/saml/acs`, ' +
          'which redirect to `return_to` with `?code=` (or `?error=&error_description=`), or without `return_to` ' +
          'show a page with the code; exchange it with `POST /auth/sso/token` within 60 seconds. The sign-in must ' +
          'finish within 10 minutes, once. An email no connection signs in is 404 `NOT_FOUND`, the same answer ' +
          'whatever the reason. `return_to` must be `http://127.0.0.1:<port>/…`, `http://[::1]:<port>/…` or an ' +
          'address at an origin of `SSO_RETURN_ORIGINS` (else 400).',
        protect: false,
      },
      errors: {
        NOT_FOUND: 'No single sign-on connection signs this email in',
        SERVICE_UNAVAILABLE: 'The identity provider could not be reached; nothing was started',
      },
    })
    .input(ZSsoStartInput)
    .output(ZSsoStartOutput)
    .mutation(({ ctx, input }) => ssoSignIn.startSso(ctx, input)),

  token: authEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/sso/token',
        tags,
        summary: 'Exchange a single sign-on code for tokens',
        description:
          'Uses up the one-time code a single sign-on ended with (good once, for 60 seconds) and answers exactly ' +
          'as `POST /auth/login`: the token pair and the user. The session is listed with `method: "sso"`; there ' +
          'is no two-factor step (the identity provider signed the user in). An unknown, used or expired code is ' +
          '401 `INVALID_CREDENTIALS`.',
        protect: false,
      },
      errors: {
        INVALID_CREDENTIALS: 'Unknown, used or expired code',
      },
    })
    .input(ZSsoTokenInput)
    .output(ZLoginOutput)
    .mutation(({ ctx, input }) => ssoSignIn.exchangeSsoCode(ctx, input)),
};
