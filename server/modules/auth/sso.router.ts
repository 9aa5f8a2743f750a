import { router } from '../../trpc/init.js';
import { requireRole } from '../../trpc/procedures.js';
import { ZNoQuery } from '../../lib/schema.js';
import { ZDeleteSsoOutput, ZSetSsoInput, ZSsoOutput, ZVerifySsoDomainInput } from './sso.schema.js';
import * as sso from './sso.service.js';
import { ssoSignInProcedures } from './sso-sign-in.router.js';
import { scimTokenProcedures } from './scim.router.js';

const tags = ['Single sign-on'];

const PLAN_402 =
  'The organization is not on the Enterprise plan (`details: [{resource: "sso", limit: 0, current: 0}]`)';

/**
 * Single sign-on (docs/sso.md), mounted as `sso` (server/router.ts): the organization's connection (`client.sso.get()`,
 * `PUT /v1/organization/sso`, ...) and the sign-in through it.
 */
export const ssoRouter = router({
  get: requireRole('owner', 'admin')
    .meta({
      openapi: {
        method: 'GET',
        path: '/organization/sso',
        tags,
        summary: 'Get the single sign-on connection',
        description:
          'Owner and admin, on the Enterprise plan. The connection without its client secret, each domain with ' +
          'the TXT record that verifies it, and the service provider’s values the IdP needs (`redirect_uri`, ' +
          '`acs_url`, `entity_id`, `metadata_url`, from `PUBLIC_BASE_URL`). No connection → 404.',
      },
      errors: { PLAN_LIMIT_EXCEEDED: PLAN_402, NOT_FOUND: 'The organization has no SSO connection' },
    })
    .input(ZNoQuery.optional())
    .output(ZSsoOutput)
    .query(({ ctx }) => sso.getSso(ctx)),

  set: requireRole('owner')
    .meta({
      openapi: {
        method: 'PUT',
        path: '/organization/sso',
        tags,
        summary: 'Create or replace the single sign-on connection',
        description:
          'Owner only, on the Enterprise plan. `protocol: "oidc"` with `issuer`, `client_id` and `client_secret` ' +
          '(the issuer’s discovery document is fetched and checked), or `protocol: "saml"` with `metadata_xml` ' +
          '(or `idp_entity_id`, `idp_sso_url`, `idp_certificate`). An issuer or IdP address must be `https://`. ' +
          'Fields left out keep their values (`client_secret`, `domains`, `default_role`, `enforced`); `domains` ' +
          'replaces the list, a new domain starting `pending`. Emits `organization.updated`.',
      },
      errors: {
        PLAN_LIMIT_EXCEEDED: PLAN_402,
        CONFLICT: 'A domain of `domains` is verified by another organization',
      },
    })
    .input(ZSetSsoInput)
    .output(ZSsoOutput)
    .mutation(({ ctx, input }) => sso.setSso(ctx, input)),

  delete: requireRole('owner')
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/organization/sso',
        tags,
        summary: 'Delete the single sign-on connection',
        description:
          'Owner only, on the Enterprise plan. The connection and its domains go; enforcement ends with them. ' +
          'Users it created keep their accounts. Emits `organization.updated`.',
      },
      errors: { PLAN_LIMIT_EXCEEDED: PLAN_402, NOT_FOUND: 'The organization has no SSO connection' },
    })
    .input(ZNoQuery.optional())
    .output(ZDeleteSsoOutput)
    .mutation(({ ctx }) => sso.deleteSso(ctx)),

  verifyDomain: requireRole('owner')
    .meta({
      openapi: {
        method: 'POST',
        path: '/organization/sso/domains/{domain}/verify',
        tags,
        summary: 'Verify a domain of the single sign-on connection',
        description:
          'Owner only, on the Enterprise plan. Looks up the TXT record `_cloud-platform.<domain>` ' +
          '(`domains[].verification.record`); when one of its values is the domain’s token, the domain becomes ' +
          '`verified` and sign-ins of its addresses route to the connection. A verified domain answers at once, ' +
          'unchanged. Emits `organization.updated` when it verifies.',
      },
      errors: {
        PLAN_LIMIT_EXCEEDED: PLAN_402,
        NOT_FOUND: 'No SSO connection, or the domain is not one of its `domains`',
        DOMAIN_NOT_VERIFIED:
          'No TXT record with the expected value was found (or the lookup failed); `details[0].record` is the ' +
          'record expected, `details[0].found` the values seen. Nothing changed.',
        CONFLICT: 'Another organization verified the domain first',
      },
    })
    .input(ZVerifySsoDomainInput)
    .output(ZSsoOutput)
    .mutation(({ ctx, input }) => sso.verifySsoDomain(ctx, input)),

  // Signing in through the connection (no token): POST /auth/sso/start and /auth/sso/token.
  ...ssoSignInProcedures,

  // The SCIM provisioning token: POST /v1/organization/scim-token.
  ...scimTokenProcedures,
});
