import { router } from '../../trpc/init.js';
import { requireRole } from '../../trpc/procedures.js';
import {
  ZApiKeyIdInput,
  ZApiKeyOutput,
  ZCreateApiKeyInput,
  ZCreateApiKeyOutput,
  ZListApiKeysInput,
  ZListApiKeysOutput,
  ZRevokeApiKeyOutput,
} from './api-keys.schema.js';
import * as apiKeys from './api-keys.service.js';

const tags = ['API keys'];

/** Keys are managed by owners and admins ("API key management"), and never with a key. */
const keyProcedure = requireRole('owner', 'admin');

export const apiKeysRouter = router({
  create: keyProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api-keys',
        tags,
        summary: 'Create an API key',
        description:
          'A long-lived bearer credential (`Authorization: Bearer sk_…`) for `/v1` and `/trpc` that acts as its ' +
          'creator with at most the listed permissions, each of which the caller must hold (403 otherwise). ' +
          'The `secret` is in this response only; it is stored hashed. Keys cannot call `/auth/*`, ' +
          '`/api-keys`, `/users`, `/webhooks`, `/audit-logs` or any role-gated operation.',
      },
      successStatus: 201,
      location: '/api-keys/{api_key.id}',
    })
    .input(ZCreateApiKeyInput)
    .output(ZCreateApiKeyOutput)
    .mutation(({ ctx, input }) => apiKeys.createApiKey(ctx, input)),

  list: keyProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api-keys',
        tags,
        summary: "List the organization's API keys",
        description: 'Live keys, newest first, page by page. Secrets are never shown again, only `prefix`.',
      },
    })
    .input(ZListApiKeysInput)
    .output(ZListApiKeysOutput)
    .query(({ ctx, input }) => apiKeys.listApiKeys(ctx, input)),

  get: keyProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api-keys/{id}',
        tags,
        summary: 'An API key',
        description: 'Its permissions, expiry and last use. A revoked key is 404.',
      },
    })
    .input(ZApiKeyIdInput)
    .output(ZApiKeyOutput)
    .query(({ ctx, input }) => apiKeys.getApiKey(ctx, input.id)),

  revoke: keyProcedure
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/api-keys/{id}',
        tags,
        summary: 'Revoke an API key',
        description:
          'The key is refused (401) from the next request on, by every server process; it is then 404 here.',
      },
    })
    .input(ZApiKeyIdInput)
    .output(ZRevokeApiKeyOutput)
    .mutation(({ ctx, input }) => apiKeys.revokeApiKey(ctx, input.id)),
});
