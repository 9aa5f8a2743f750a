import { z } from 'zod';
import { PERMISSIONS } from '../../access/permissions.js';
import { pageQueryShape, pageResponse } from '../../lib/pagination.js';
import { okResponse, zPathId } from '../../lib/schema.js';
import { API_KEY_PERMISSIONS, DEFAULT_EXPIRES_IN_DAYS, MAX_EXPIRES_IN_DAYS } from './api-keys.constants.js';

const ZId = zPathId('key', 'API key');

// ---------- inputs ----------

export const ZCreateApiKeyInput = z.strictObject({
  name: z.string().trim().min(1).max(100).describe('A name to recognise the key by, 1 to 100 characters'),
  permissions: z
    .array(
      z.enum(API_KEY_PERMISSIONS, {
        error: () => `Not a permission an API key can use; one of ${API_KEY_PERMISSIONS.join(', ')}`,
      }),
    )
    .min(1)
    .max(API_KEY_PERMISSIONS.length * 2)
    .describe(
      'Permission strings `<resource>:<level>` the key may use (at least one), among those an operation open to ' +
        'keys checks: no `users:*` (keys are closed to `/users`), no `billing:delete` or `billing:admin`. Each ' +
        'must be held by the caller (403 otherwise); a later change to the creator narrows the key',
    ),
  expires_in_days: z
    .number()
    .int()
    .min(1)
    .max(MAX_EXPIRES_IN_DAYS)
    .optional()
    .describe(`Days until the key expires, 1 to ${MAX_EXPIRES_IN_DAYS} (default ${DEFAULT_EXPIRES_IN_DAYS})`),
});
export type TCreateApiKeyInput = z.infer<typeof ZCreateApiKeyInput>;

export const ZListApiKeysInput = z.object({ ...pageQueryShape });
export type TListApiKeysInput = z.infer<typeof ZListApiKeysInput>;

export const ZApiKeyIdInput = z.object({ id: ZId });

// ---------- outputs ----------

export const ZApiKey = z
  .object({
    id: z.string().describe('`key_…`'),
    name: z.string(),
    prefix: z.string().describe("The secret's first 12 characters (`sk_…`), to tell keys apart"),
    permissions: z.array(z.enum(PERMISSIONS)).describe('Permissions listed on the key'),
    created_by: z.string().describe('Id of the user who created the key; the key acts as this user'),
    created_at: z.string(),
    expires_at: z.string(),
    last_used_at: z
      .string()
      .nullable()
      .describe('Last time the key authenticated a request, to the minute (updated at most once a minute)'),
  })
  .meta({ id: 'ApiKey' });
export type TApiKey = z.infer<typeof ZApiKey>;

export const ZCreateApiKeyOutput = okResponse({
  api_key: ZApiKey,
  secret: z
    .string()
    .describe('The key itself, `sk_…`: shown in this response only. Send it as `Authorization: Bearer sk_…`'),
});

export const ZApiKeyOutput = okResponse({ api_key: ZApiKey });

export const ZListApiKeysOutput = pageResponse('api_keys', ZApiKey);

export const ZRevokeApiKeyOutput = okResponse({
  message: z.string(),
  id: z.string(),
});
