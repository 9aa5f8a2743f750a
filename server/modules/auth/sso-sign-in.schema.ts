import { z } from 'zod';
import { okResponse, ZEmail } from '../../lib/schema.js';

// ---------- single sign-on: start and token (docs/sso.md, "Signing in") ----------

export const ZSsoStartInput = z.strictObject({
  email: ZEmail.describe(
    'The address of the person signing in (case-insensitive): its domain chooses the organization',
  ),
  return_to: z
    .string()
    .min(1)
    .max(2048)
    .optional()
    .describe(
      'Where the browser is sent with `?code=` once signed in: `http://127.0.0.1:<port>/…` or ' +
        '`http://[::1]:<port>/…` (a command-line client), or an address at an origin of `SSO_RETURN_ORIGINS`. ' +
        'Absent: a page shows the code.',
    ),
});
export type TSsoStartInput = z.infer<typeof ZSsoStartInput>;

export const ZSsoStartOutput = okResponse({
  authorization_url: z
    .string()
    .describe(
      'The identity provider’s address to open in a browser; the sign-in must finish within 10 minutes',
    ),
});
export type TSsoStartOutput = z.infer<typeof ZSsoStartOutput>;

export const ZSsoTokenInput = z.strictObject({
  code: z
    .string()
    .trim()
    .min(1)
    .max(256)
    .describe('The one-time code the sign-in ended with (`ssoc_…`): good once, for 60 seconds'),
});
export type TSsoTokenInput = z.infer<typeof ZSsoTokenInput>;
