import { requireRole } from '../../trpc/procedures.js';
import { ZEmptyInput } from '../../lib/schema.js';
import { ZScimTokenOutput } from './scim.schema.js';
import * as scim from './scim.service.js';

/**
 * The SCIM token (docs/sso.md, "SCIM provisioning"): spread into the `sso` router (`client.sso.scimToken()`), since
 * SCIM shares single sign-on's plan and role rules.
 */
export const scimTokenProcedures = {
  scimToken: requireRole('owner')
    .meta({
      openapi: {
        method: 'POST',
        path: '/organization/scim-token',
        tags: ['Single sign-on'],
        summary: 'Make the SCIM provisioning token',
        description:
          'Owner only, on the Enterprise plan. A new bearer token for the SCIM API at `/scim/v2` (docs/sso.md, ' +
          '"SCIM provisioning"), shown this once and stored hashed; it replaces the previous token, which stops ' +
          'working at once. Emits `organization.updated`.',
      },
      errors: {
        PLAN_LIMIT_EXCEEDED:
          'The organization is not on the Enterprise plan (`details: [{resource: "sso", limit: 0, current: 0}]`)',
      },
    })
    .input(ZEmptyInput.optional())
    .output(ZScimTokenOutput)
    .mutation(({ ctx }) => scim.createScimToken(ctx)),
};
