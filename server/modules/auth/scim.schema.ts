import { z } from 'zod';
import { okResponse } from '../../lib/schema.js';

/** `POST /organization/scim-token`: the token, shown once, and where the identity provider sends it. */
export const ZScimTokenOutput = okResponse({
  scim: z
    .object({
      token: z
        .string()
        .describe(
          'The bearer token of SCIM provisioning (`scim_…`), shown this once and stored hashed: give it to the ' +
            'identity provider. It replaced the previous token, which no longer works.',
        ),
      base_url: z
        .string()
        .describe('The SCIM base URL the identity provider calls (`<PUBLIC_BASE_URL>/scim/v2`, docs/sso.md)'),
      created_at: z.string().describe('ISO 8601 UTC'),
    })
    .meta({ id: 'ScimToken' }),
});
export type TScimTokenOutput = z.infer<typeof ZScimTokenOutput>;
