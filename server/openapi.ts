import type { AnyTRPCProcedure } from '@trpc/server';
import { generateOpenApiDocument, type OpenAPIObject } from 'trpc-to-openapi';
import { ERROR_CODES } from './lib/errors.js';
import { appRouter } from './router.js';
import type { Meta } from './trpc/init.js';

type Json = Record<string, unknown>;

const ERROR_SCHEMA: Json = {
  type: 'object',
  required: ['success', 'error'],
  properties: {
    success: { type: 'boolean', const: false },
    error: {
      type: 'object',
      required: ['code', 'message', 'request_id'],
      properties: {
        code: { type: 'string', enum: ERROR_CODES, description: 'Stable machine-readable error code' },
        message: { type: 'string', description: 'Human readable explanation' },
        details: {
          type: 'array',
          description:
            '`{path, message}` for validation issues; `{resource, limit, current}` for plan limits',
          items: { type: 'object', additionalProperties: true },
        },
        request_id: { type: 'string', description: 'Equals the X-Request-Id response header' },
      },
    },
  },
};

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid input (`VALIDATION_ERROR`, `INVALID_JSON`)',
  401: 'Missing, invalid or expired token (`UNAUTHORIZED`, `TOKEN_EXPIRED`, `INVALID_CREDENTIALS`)',
  402: 'Plan limit reached (`PLAN_LIMIT_EXCEEDED`)',
  403: 'Not allowed (`FORBIDDEN`, `HTTPS_REQUIRED`)',
  404: 'Not found, or not visible to the caller (`NOT_FOUND`)',
  409: 'Conflict with the current state (`CONFLICT`)',
  413: 'Body over 1 MiB (`PAYLOAD_TOO_LARGE`)',
  415: 'Body not sent as application/json (`UNSUPPORTED_MEDIA_TYPE`)',
  429: 'Too many requests (`RATE_LIMITED`, `QUOTA_EXCEEDED`, `TOO_MANY_LOGIN_ATTEMPTS`); see Retry-After',
  500: 'Unexpected error (`INTERNAL_ERROR`)',
  503: 'Database unavailable (`SERVICE_UNAVAILABLE`)',
};

function errorStatusesFor(meta: Meta, method: string): number[] {
  const out = [400];
  if (meta.auth !== 'public') out.push(401, 429);
  if (meta.auth === 'permission' || meta.openapi?.path.startsWith('/auth')) out.push(403);
  if (meta.openapi?.path.includes('{')) out.push(404);
  if (method !== 'get' && method !== 'delete') out.push(413, 415);
  out.push(500);
  return [...new Set(out)].sort();
}

/**
 * The OpenAPI 3.1 document of every `/v1` operation. trpc-to-openapi documents every success as 200 and knows
 * nothing of our error envelope, so both are added here from each procedure's meta.
 */
export function buildOpenApiDocument(publicBaseUrl: string): OpenAPIObject {
  const doc = generateOpenApiDocument(appRouter, {
    title: 'Cloud Platform API',
    version: '1.0.0',
    description:
      'Manage VPN connections, users and permissions, static sites, managed databases, billing and webhooks. ' +
      'Every success body has `success: true`; every error body is the envelope `{success: false, error}`.',
    baseUrl: `${publicBaseUrl}/v1`,
  });
  const components = (doc.components ??= {});
  components.schemas = { ...(components.schemas ?? {}), Error: ERROR_SCHEMA };
  const errorRef = { $ref: '#/components/schemas/Error' };

  const byOperation = new Map<string, Meta>();
  for (const proc of Object.values(
    appRouter._def.procedures as unknown as Record<string, AnyTRPCProcedure>,
  )) {
    const meta = proc._def.meta as Meta | undefined;
    if (meta?.openapi) byOperation.set(`${meta.openapi.method.toLowerCase()} ${meta.openapi.path}`, meta);
  }

  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(item as Record<string, Json>)) {
      const meta = byOperation.get(`${method} ${path}`);
      if (!meta || typeof op !== 'object' || !op.responses) continue;
      const responses = op.responses as Record<string, Json>;
      if (meta.successStatus && responses['200']) {
        const ok = responses['200'];
        delete responses['200'];
        responses[String(meta.successStatus)] = {
          ...ok,
          description: meta.successStatus === 201 ? 'Created; `Location` names the new resource' : 'Accepted',
        };
      }
      for (const key of Object.keys(responses))
        if (key !== 'default' && Number(key) >= 400) delete responses[key];
      for (const status of errorStatusesFor(meta, method)) {
        responses[String(status)] = {
          description: ERROR_DESCRIPTIONS[status] ?? 'Error',
          content: { 'application/json': { schema: errorRef } },
        };
      }
    }
  }
  return doc;
}
