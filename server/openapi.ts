import type { AnyTRPCProcedure, AnyTRPCRouter } from '@trpc/server';
import { generateOpenApiDocument, type OpenAPIObject } from 'trpc-to-openapi';
import { z } from 'zod';
import type { AnyEventDefinition } from './events/define-event.js';
import { guidesMarkdown, listGuides } from './guides.js';
import { ERROR_CODES, ERROR_STATUS, type ErrorCode } from './lib/errors.js';
import { modules } from './modules.js';
import { procedureInputIsStrict, procedureTakesInput } from './rest.js';
import { appRouter } from './router.js';
import { takesIdempotencyKey } from './trpc/idempotency.js';
import type { Meta } from './trpc/init.js';
import { isClosedToApiKeys } from './trpc/procedures.js';

type Json = Record<string, unknown>;

export const API_TITLE = 'Cloud Platform API';
export const API_VERSION = '1.0.0';
const SECURITY_SCHEME = 'bearerAuth';
/** `info.contact`: the team behind the API, with the reference page when the public address is known. */
function apiContact(publicBaseUrl: string | undefined) {
  const name = 'Cloud Platform API team';
  return publicBaseUrl ? { name, url: `${publicBaseUrl.replace(/\/$/, '')}/docs` } : { name };
}
const API_KEY_SCHEME = 'apiKeyAuth';

const API_DESCRIPTION = `Manage VPN connections, users and permissions, static sites, managed databases, billing and webhooks.

## Authentication
Log in with \`POST /auth/login\` (or create an organization with \`POST /auth/register\`) and send the access token as
\`Authorization: Bearer <token>\`. Access tokens live one hour; \`POST /auth/refresh\` exchanges the single-use
refresh token for a new pair.

Programs may use an **API key** instead (\`POST /api-keys\`, owners and admins): \`Authorization: Bearer sk_…\`. A key
acts as its creator with the permissions listed on it that the creator still holds; it cannot call \`/auth/*\`,
\`/api-keys\`, \`/users\`, \`/webhooks\`, \`/audit-logs\` or any operation reserved to a role (403). Operations open to
keys list both security schemes.

## Idempotency
Every authenticated \`POST\` and \`PUT /billing/subscription\` accept an \`Idempotency-Key\` header (1–255 printable
ASCII characters). The first answer (status, \`Location\`, body) is kept 24 hours under the organization, the caller
(the user, or the API key) and the key; a repeat by the same caller with the same method, path and body gets it again
with \`Idempotent-Replayed: true\` and changes nothing. The same key sent by another caller is a request of its own.
The same caller's key with another request is 422 \`IDEMPOTENCY_KEY_REUSED\`; while the first is still running, 409
\`CONFLICT\`. Answers 400, 401, 403, 409, 429 and 5xx are not kept.

## Responses
Request bodies are JSON (\`Content-Type: application/json\`, at most 1 MiB); unknown body fields are refused.
Every success body has \`success: true\`. Creates answer **201** with a \`Location\` header; accepted asynchronous
actions answer **202**. Timestamps are ISO 8601 UTC with milliseconds, absent optional values are \`null\`.

## Errors
Every error body is the envelope \`{"success": false, "error": {"code", "message", "details", "request_id"}}\`;
\`error.code\` is stable and machine readable. \`request_id\` equals the \`X-Request-Id\` response header that every
response carries (a valid incoming \`X-Request-Id\` is reused).

## Browsers (CORS)
Pages of the origins the server allows (\`CORS_ORIGINS\`; any origin by default) may call the API from a browser:
preflights are answered 204 for \`Authorization\`, \`Content-Type\`, \`Idempotency-Key\`, \`X-Request-Id\` and
\`Last-Event-ID\`, and every answer, errors and event streams included, carries \`Access-Control-Allow-Origin\` and
exposes \`X-Request-Id\`, \`Location\`, \`RateLimit\`, \`RateLimit-Policy\`, \`Retry-After\` and
\`Idempotent-Replayed\`. Credentials mode is never allowed: the API reads bearer tokens, never cookies. A browser
app signs its user in and keeps the user's tokens; it never holds an API key of the organization.

## Rate limits
Authenticated requests count against the monthly quota of the organization's plan and a short burst limit per
token. Their responses carry \`RateLimit-Policy\` and \`RateLimit\`; every 429 carries \`Retry-After\` (seconds).

## Lists
Page lists take \`?page=1&limit=20\` and return the items with \`total\`, \`page\`, \`limit\` and \`has_more\`;
cursor lists take \`?limit=20&starting_after=<id>\` and return \`total\` and \`has_more\`. Newest first. Page lists
take \`starting_after\` too (not with \`page\`): the items after that one, at the same cost on any page, while a
\`page\` costs its offset; in that mode \`page\` is \`null\`. A \`starting_after\` that is not an item of the list
with the same filters → 400 \`VALIDATION_ERROR\`. \`total\` is exact and counts every item matching the filters, on
all pages.`;

/** Descriptions of the tags the modules use; a tag missing here still gets declared, with a generic text. */
const TAG_DESCRIPTIONS: Record<string, string> = {
  Authentication: 'Log in, refresh and revoke tokens, register an organization, the current user.',
  Users: 'Members of the organization, their roles, permissions and invitations.',
  VPN: 'VPN servers and WireGuard connections.',
  Hosting: 'Static sites and their deployments.',
  Databases: 'Managed databases and their backups.',
  Billing: 'Plans, subscription, invoices and payment methods.',
  Webhooks: 'Webhook endpoints, their deliveries and test events.',
  Organization: 'The organization, its plan and usage.',
  'API keys': 'Long-lived, scoped bearer credentials for programs, managed by owners and admins.',
};

const ERROR_SCHEMA: Json = {
  type: 'object',
  description: 'The error envelope of every error response.',
  required: ['success', 'error'],
  additionalProperties: false,
  properties: {
    success: { type: 'boolean', const: false, description: 'Always `false` on errors' },
    error: {
      type: 'object',
      required: ['code', 'message', 'request_id'],
      additionalProperties: false,
      properties: {
        code: { type: 'string', enum: ERROR_CODES, description: 'Stable machine-readable error code' },
        message: { type: 'string', description: 'Human readable explanation' },
        details: {
          type: 'array',
          description:
            '`{path, message}` per validation issue; `{resource, limit, current}` for plan limits; ' +
            'the offending resources for state conflicts',
          items: {
            type: 'object',
            additionalProperties: true,
            properties: {
              path: { type: 'string', description: 'Dotted path of the invalid field' },
              message: { type: 'string', description: 'What is wrong with it' },
              resource: { type: 'string', description: 'Limited resource' },
              limit: { type: 'integer', description: 'Limit of the plan' },
              current: { type: 'integer', description: 'Current usage' },
            },
          },
        },
        request_id: { type: 'string', description: 'Equals the `X-Request-Id` response header' },
      },
    },
  },
  examples: [
    {
      success: false,
      error: {
        code: 'VALIDATION_ERROR',
        message: 'Invalid request: name: Required',
        details: [{ path: 'name', message: 'Required' }],
        request_id: 'req_3k9v0f2h8x1q7m4n5b6c',
      },
    },
  ],
};

const HEADERS: Record<string, Json> = {
  RequestId: {
    description:
      'Identifies the request in logs and in `error.request_id`. A valid incoming `X-Request-Id` ' +
      '(`[A-Za-z0-9._-]{1,128}`) is reused.',
    required: true,
    schema: { type: 'string' },
  },
  Location: {
    description: 'URL of the created resource',
    required: true,
    schema: { type: 'string', format: 'uri' },
  },
  RateLimitPolicy: {
    description: 'The burst limit of the token: `"burst";q=<requests>;w=<seconds>`',
    schema: { type: 'string' },
    example: '"burst";q=100;w=10',
  },
  RateLimit: {
    description: 'What is left of the burst limit: `"burst";r=<remaining>;t=<seconds until reset>`',
    schema: { type: 'string' },
    example: '"burst";r=99;t=10',
  },
  RetryAfter: {
    description: 'Seconds to wait before trying again',
    required: true,
    schema: { type: 'integer', minimum: 0 },
  },
  IdempotentReplayed: {
    description:
      '`true` when this is the kept answer of an earlier request with the same `Idempotency-Key` (nothing was done again)',
    schema: { type: 'string', enum: ['true'] },
  },
  WWWAuthenticate: {
    description: '`Bearer` on token failures',
    schema: { type: 'string' },
  },
  // Named as the header: the OWASP ruleset looks for this name in every `headers` map.
  'Access-Control-Allow-Origin': {
    description:
      'CORS: sent to a request whose `Origin` the server allows (`CORS_ORIGINS`): `*`, or that origin when a list ' +
      'is configured. Never with `Access-Control-Allow-Credentials`.',
    schema: { type: 'string' },
  },
};
const headerRef = (name: keyof typeof HEADERS) => ({ $ref: `#/components/headers/${name}` });

/** Reusable error responses, one per status, named as components. */
const ERROR_RESPONSES: Record<number, { name: string; text: string }> = {
  400: { name: 'BadRequest', text: 'Invalid input' },
  401: { name: 'Unauthorized', text: 'Missing, invalid, revoked or expired token, or bad credentials' },
  402: { name: 'PaymentRequired', text: 'The plan does not allow more of this resource' },
  403: { name: 'Forbidden', text: 'Not allowed' },
  404: { name: 'NotFound', text: 'Not found, or not visible to the caller' },
  409: { name: 'Conflict', text: 'Conflicts with the current state' },
  413: { name: 'PayloadTooLarge', text: 'Body over 1 MiB' },
  415: { name: 'UnsupportedMediaType', text: 'Body not sent as `application/json`' },
  422: { name: 'UnprocessableContent', text: 'Idempotency key reused with a different body' },
  429: { name: 'TooManyRequests', text: 'Too many requests; see `Retry-After`' },
  500: { name: 'InternalError', text: 'Unexpected error' },
  503: { name: 'ServiceUnavailable', text: 'Temporarily unavailable (database unreachable)' },
};

const codeList = (codes: readonly ErrorCode[]) => codes.map((c) => `\`${c}\``).join(', ');
const codesOfStatus = (status: number) => ERROR_CODES.filter((c) => ERROR_STATUS[c] === status);

/**
 * An error response: the envelope, `X-Request-Id`, `WWW-Authenticate` on 401, `Retry-After` on 429, and on
 * authenticated operations the rate-limit headers (sent on every answer to a token, errors included).
 */
function errorResponse(
  status: number,
  opts: { description?: string; codes?: readonly ErrorCode[]; rateLimited?: boolean } = {},
): Json {
  const known = ERROR_RESPONSES[status];
  const codes = opts.codes ?? codesOfStatus(status);
  const headers: Json = { 'X-Request-Id': headerRef('RequestId') };
  if (status === 401) headers['WWW-Authenticate'] = headerRef('WWWAuthenticate');
  if (status === 429) headers['Retry-After'] = headerRef('RetryAfter');
  if (opts.rateLimited) {
    headers['RateLimit-Policy'] = headerRef('RateLimitPolicy');
    headers.RateLimit = headerRef('RateLimit');
  }
  return {
    description: `${opts.description ?? known?.text ?? 'Error'}${codes.length ? ` (${codeList(codes)})` : ''}`,
    headers,
    content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
  };
}

const BODY_METHODS = new Set(['post', 'put', 'patch']);

/** What the base procedure answers when it does not say (a procedure built on the bare tRPC procedure). */
function fallbackBaseErrors(meta: Meta): readonly ErrorCode[] {
  if (meta.auth === 'public' || meta.auth === undefined) return [];
  return ['UNAUTHORIZED', 'TOKEN_EXPIRED', 'FORBIDDEN', 'RATE_LIMITED', 'QUOTA_EXCEEDED'];
}

interface DeclaredError {
  codes: ErrorCode[];
  /** Why the operation's own errors happen (from `meta.errors` / `meta.openapi.errorResponses`). */
  reasons: string[];
}

/**
 * The errors an operation can answer, by status: from its input (a query or body can be invalid, a body can be too
 * large or not JSON), its path (an unknown id is 404), the base procedure (`meta.baseErrors`: token, limits,
 * permission, HTTPS), the procedure's own (`meta.errors`, by code; `meta.openapi.errorResponses`, by status: every
 * code of that status), and the server's (500, 503).
 */
export function declaredErrors(
  meta: Meta,
  method: string,
  op: Json,
  takesInput = false,
): Map<number, DeclaredError> {
  const out = new Map<number, DeclaredError>();
  const add = (codes: readonly ErrorCode[], reason?: string, status: number = ERROR_STATUS[codes[0]!]) => {
    const entry = out.get(status) ?? { codes: [], reasons: [] };
    for (const code of codes) if (!entry.codes.includes(code)) entry.codes.push(code);
    if (reason) entry.reasons.push(reason);
    out.set(status, entry);
  };
  // A malformed path id is a 404; but a value with text no schema may receive (NUL, a lone surrogate:
  // server/lib/input-limits.ts) is invalid input wherever it is, path and ignored query keys included: any
  // procedure that reads input can answer 400.
  const params = (op.parameters as Json[] | undefined) ?? [];
  const hasInput = takesInput || params.length > 0 || op.requestBody !== undefined;
  const hasBody = BODY_METHODS.has(method) || meta.deleteWithBody === true;
  if (hasInput || hasBody) add(['VALIDATION_ERROR']);
  if (hasBody) add(['INVALID_JSON']);
  for (const code of meta.baseErrors ?? fallbackBaseErrors(meta)) add([code]);
  if (meta.openapi?.path.includes('{') || meta.openapi?.path.includes(':')) add(['NOT_FOUND']);
  if (hasBody) {
    add(['PAYLOAD_TOO_LARGE']);
    add(['UNSUPPORTED_MEDIA_TYPE']);
  }
  add(['INTERNAL_ERROR']);
  add(['SERVICE_UNAVAILABLE']);
  for (const [code, reason] of Object.entries(meta.errors ?? {}) as [ErrorCode, string][])
    add([code], reason);
  const extra = meta.openapi?.errorResponses;
  const extraStatuses = Array.isArray(extra) ? extra : Object.keys(extra ?? {}).map(Number);
  for (const status of extraStatuses) {
    const reason = extra && !Array.isArray(extra) ? extra[status] : undefined;
    add(codesOfStatus(status), reason, status);
  }
  return new Map([...out.entries()].sort(([a], [b]) => a - b));
}

/** The errors of an `Idempotency-Key` (docs/api-conventions.md, "Idempotency"), added to an operation that takes one. */
function addIdempotencyErrors(declared: Map<number, DeclaredError>): void {
  for (const code of ['CONFLICT', 'IDEMPOTENCY_KEY_REUSED'] as const) {
    const status = ERROR_STATUS[code];
    const entry = declared.get(status) ?? { codes: [], reasons: [] };
    if (!entry.codes.includes(code)) entry.codes.push(code);
    declared.set(status, entry);
  }
  const sorted = [...declared.entries()].sort(([a], [b]) => a - b);
  declared.clear();
  for (const [status, entry] of sorted) declared.set(status, entry);
}

/**
 * Name of a shared error response: the status's name, or its codes when they are not all of the status's; with
 * `Authenticated` before it for the variant with the rate-limit headers.
 */
function errorResponseName(status: number, codes: readonly ErrorCode[], rateLimited: boolean): string {
  const all = codesOfStatus(status);
  const pascal = (code: string) =>
    code
      .toLowerCase()
      .split('_')
      .map((w) => w[0]!.toUpperCase() + w.slice(1))
      .join('');
  const base = ERROR_RESPONSES[status]?.name ?? `Status${status}`;
  const name =
    codes.length === all.length && codes.every((c) => all.includes(c)) ? base : codes.map(pascal).join('Or');
  return rateLimited ? `Authenticated${name}` : name;
}

/** `vpn.connections.list` → `vpnConnectionsList`. */
function operationIdOf(procedurePath: string): string {
  return procedurePath
    .split(/[.\-_]/)
    .filter(Boolean)
    .map((part, i) => (i === 0 ? part : part[0]!.toUpperCase() + part.slice(1)))
    .join('');
}

const normalizePath = (path: string) => path.replace(/:(\w+)/g, '{$1}').replace(/(.)\/$/, '$1');

/** Fallback descriptions for fields that mean the same thing everywhere, when the schema gives none. */
const FIELD_DESCRIPTIONS: Record<string, string> = {
  success: 'Always `true` on success',
  id: 'Identifier, `<prefix>_<opaque>`',
  created_at: 'When it was created (ISO 8601 UTC, milliseconds)',
  updated_at: 'When it last changed (ISO 8601 UTC, milliseconds)',
  message: 'Human readable outcome',
  total: 'Number of items matching the filters, on all pages',
  page: 'Page number, starting at 1',
  limit: 'Items per page',
  has_more: 'Whether more items follow the last one returned',
  organization_id: 'Organization id, `org_…`',
  user_id: 'User id, `usr_…`',
  name: 'Display name',
  status: 'Current state',
};

/** Parameters carry their schema's description; filters and ids get a generic one when they have none. */
/** A `DELETE` that reads a JSON body (meta `deleteWithBody`): its query parameters become the body's fields. */
function queryToBody(op: Json): void {
  const params = (op.parameters as Json[] | undefined) ?? [];
  const properties: Json = {};
  const required: string[] = [];
  for (const p of params.filter((x) => x.in === 'query')) {
    const schema = { ...((p.schema as Json | undefined) ?? {}) };
    if (p.description !== undefined && schema.description === undefined) schema.description = p.description;
    properties[String(p.name)] = schema;
    if (p.required) required.push(String(p.name));
  }
  op.parameters = params.filter((x) => x.in !== 'query');
  op.requestBody = {
    required: true,
    content: {
      'application/json': {
        schema: { type: 'object', properties, required, additionalProperties: false },
      },
    },
  };
}

/**
 * States on a body what the server enforces: a strict input refuses unknown fields (`additionalProperties: false`,
 * which the generator leaves out of a refined object), and an action whose input is only its path parameters
 * still reads a body when one is sent (`{}` or nothing; any field is 400), so it declares an optional empty one.
 */
function declareStrictBody(op: Json, strict: boolean): void {
  if (!strict) return;
  if (op.requestBody === undefined) {
    op.requestBody = {
      required: false,
      content: {
        'application/json': { schema: { type: 'object', properties: {}, additionalProperties: false } },
      },
    };
    return;
  }
  const schema = ((op.requestBody as Json).content as Record<string, Json> | undefined)?.['application/json']
    ?.schema as Json | undefined;
  if (schema && schema.$ref === undefined && schema.additionalProperties === undefined) {
    schema.additionalProperties = false;
  }
}

function describeParameters(op: Json): void {
  for (const param of (op.parameters as Json[] | undefined) ?? []) {
    const schema = param.schema as Json | undefined;
    if (param.description === undefined && typeof schema?.description === 'string') {
      param.description = schema.description;
      delete schema.description;
    }
    if (param.description !== undefined) continue;
    const name = String(param.name);
    if (param.in === 'path' && name === 'id') param.description = 'Identifier of the resource';
    else if (param.in === 'path') param.description = `The \`${name}\` of the resource`;
    else if (schema?.enum) param.description = `Only items whose \`${name}\` is this value`;
    else if (name.endsWith('_id')) param.description = `Only items of this \`${name}\``;
  }
}

const SAFE_INT = Number.MAX_SAFE_INTEGER;

/** Walks every schema: fills well-known field descriptions, marks `*_at` strings as date-times, drops ±2^53 bounds. */
function polishSchema(schema: unknown, seen = new Set<unknown>()): void {
  if (!schema || typeof schema !== 'object' || seen.has(schema)) return;
  seen.add(schema);
  if (Array.isArray(schema)) {
    for (const s of schema) polishSchema(s, seen);
    return;
  }
  const s = schema as Json;
  if (s.minimum === -SAFE_INT) delete s.minimum;
  if (s.maximum === SAFE_INT) delete s.maximum;
  const props = s.properties as Record<string, Json> | undefined;
  if (props && typeof props === 'object') {
    for (const [name, prop] of Object.entries(props)) {
      if (!prop || typeof prop !== 'object' || '$ref' in prop) continue;
      if (prop.description === undefined && FIELD_DESCRIPTIONS[name])
        prop.description = FIELD_DESCRIPTIONS[name];
      const types = Array.isArray(prop.type) ? prop.type : [prop.type];
      if (name.endsWith('_at') && types.includes('string') && !prop.format && !prop.enum) {
        prop.format = 'date-time';
      }
    }
  }
  for (const [key, value] of Object.entries(s)) {
    if (key === 'examples' || key === 'example' || key === 'enum' || key === 'const') continue;
    polishSchema(value, seen);
  }
}

/**
 * Drops components nothing refers to: trpc-to-openapi registers its own error shapes (replaced here), and the
 * error responses and headers declared above are only kept when some operation uses them.
 */
function pruneUnusedComponents(doc: OpenAPIObject): void {
  const components = (doc.components ?? {}) as Record<string, Record<string, unknown> | undefined>;
  const kinds = ['schemas', 'responses', 'headers'];
  const used = new Set<string>();
  const visit = (node: unknown): void => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach(visit);
    for (const [k, v] of Object.entries(node as Json)) {
      const m = k === '$ref' && typeof v === 'string' ? /^#\/components\/(\w+)\/(.+)$/.exec(v) : null;
      if (m && kinds.includes(m[1]!)) {
        const key = `${m[1]}/${decodeURIComponent(m[2]!)}`;
        if (!used.has(key)) {
          used.add(key);
          visit(components[m[1]!]?.[decodeURIComponent(m[2]!)]);
        }
      } else visit(v);
    }
  };
  visit(doc.paths);
  visit((doc as unknown as Json).webhooks);
  for (const kind of kinds) {
    const group = components[kind];
    if (!group) continue;
    for (const name of Object.keys(group)) if (!used.has(`${kind}/${name}`)) delete group[name];
  }
}

/** Every response of every operation may carry `Access-Control-Allow-Origin` (docs/api-conventions.md, "Browsers (CORS)"). */
function addCorsHeader(doc: OpenAPIObject): void {
  const add = (response: Json) => {
    if (typeof response.$ref === 'string') return;
    response.headers = { ...(response.headers as Json | undefined), ...CORS_HEADER };
  };
  const CORS_HEADER = { 'Access-Control-Allow-Origin': headerRef('Access-Control-Allow-Origin') };
  for (const item of Object.values(doc.paths ?? {}))
    for (const op of Object.values(item as Record<string, Json>))
      for (const response of Object.values((op.responses as Record<string, Json> | undefined) ?? {}))
        add(response);
  for (const response of Object.values((doc.components?.responses ?? {}) as unknown as Record<string, Json>))
    add(response);
}

/** `user.created` → `UserCreatedEvent`: the component schema of an event's body. */
function eventSchemaName(type: string): string {
  return `${type
    .split('.')
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('')}Event`;
}

/** The event body of conventions §8 (docs/webhooks.md, "Webhooks"), with this event's `data.object`: the resource's API view. */
function eventEnvelope(def: AnyEventDefinition): z.ZodType {
  return z
    .object({
      id: z.string().describe('Event id, `evt_…`: the same on every retry of the delivery'),
      type: z.literal(def.type).describe('The event type'),
      created_at: z.string().describe('When the event happened (ISO 8601 UTC, milliseconds)'),
      organization_id: z.string().describe('The organization the event is delivered to, `org_…`'),
      data: z
        .object({ object: def.schema.describe('The resource as the API shows it') })
        .describe('What the event is about'),
    })
    .describe(`The body of a \`${def.type}\` delivery: ${def.description}`);
}

/** Headers of every delivery (docs/webhooks.md, "Webhooks"), as parameters of the webhooks' operations. */
const DELIVERY_HEADERS: Record<
  string,
  { name: string; description: string; schema: Json; example?: string }
> = {
  VpnSignature: {
    name: 'X-VPN-Signature',
    description:
      '`sha256=` and the lowercase hex HMAC-SHA256 of the exact body bytes, keyed by the whole secret string ' +
      '(`whsec_…`). Compare in constant time before trusting the body.',
    schema: { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' },
  },
  VpnEvent: {
    name: 'X-VPN-Event',
    description: 'The event type (`type` of the body)',
    schema: { type: 'string' },
  },
  VpnDelivery: {
    name: 'X-VPN-Delivery',
    description: 'The delivery id, `del_…` (`GET /webhooks/{id}/deliveries`)',
    schema: { type: 'string' },
  },
  VpnDeliveryAttempt: {
    name: 'X-VPN-Delivery-Attempt',
    description: 'Which attempt of the delivery this is, from 1',
    schema: { type: 'integer', minimum: 1 },
  },
  WebhookId: {
    name: 'webhook-id',
    description:
      'Standard Webhooks message id: the event id (`evt_…`), the same on every retry; use it to deduplicate',
    schema: { type: 'string' },
  },
  WebhookTimestamp: {
    name: 'webhook-timestamp',
    description: 'Standard Webhooks: Unix seconds of this attempt; reject old ones to refuse replays',
    schema: { type: 'integer' },
  },
  WebhookSignature: {
    name: 'webhook-signature',
    description:
      'Standard Webhooks: `v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`, keyed by ' +
      'the base64-decoded bytes after `whsec_`',
    schema: { type: 'string', pattern: '^v1,[A-Za-z0-9+/=]+$' },
  },
};

/** The OpenAPI 3.1 `webhooks`: one operation per event type, what the platform POSTs to a subscribed endpoint. */
function webhooksSection(events: readonly AnyEventDefinition[]): Json {
  const out: Json = {};
  for (const def of [...events].sort((a, b) => a.type.localeCompare(b.type))) {
    out[def.type] = {
      post: {
        operationId: `on${eventSchemaName(def.type)}`,
        summary: `\`${def.type}\` event`,
        description:
          `${def.description} Sent to every active webhook subscribed to \`${def.type}\`, as a JSON \`POST\` ` +
          'signed with the webhook’s secret, at least once: retried on failure with the same event id and bytes.',
        tags: ['Webhooks'],
        security: [],
        parameters: Object.keys(DELIVERY_HEADERS).map((name) => ({
          $ref: `#/components/parameters/${name}`,
        })),
        requestBody: {
          required: true,
          content: {
            'application/json': { schema: { $ref: `#/components/schemas/${eventSchemaName(def.type)}` } },
          },
        },
        responses: {
          '200': { description: 'Any 2xx answered within 10 s acknowledges the delivery' },
          '410': { description: 'Gone: the webhook is disabled and receives nothing more' },
          default: { description: 'Anything else, or no answer within 10 s: the delivery is retried later' },
        },
      },
    };
  }
  return out;
}

export interface OpenApiOptions {
  /** Where the API is reached (`PUBLIC_BASE_URL`); without it the server URL is the relative `/v1`. */
  publicBaseUrl?: string;
  /** The router to document (tests pass their own). */
  router?: AnyTRPCRouter;
  /** The events documented as `webhooks` (the modules' catalogue unless given). */
  events?: readonly AnyEventDefinition[];
}

/**
 * The OpenAPI 3.1 document of every `/v1` operation. trpc-to-openapi generates paths and schemas from the router;
 * everything it cannot know comes from each procedure's meta here: success status (201/202 and `Location`),
 * the error envelope on every error status, security, tags, operation ids and the standard headers.
 */
export function buildOpenApiDocument(opts: OpenApiOptions = {}): OpenAPIObject {
  const router = opts.router ?? appRouter;
  const events = opts.events ?? modules.flatMap((m) => m.events ?? []);
  const doc = generateOpenApiDocument(router as never, {
    contact: apiContact(opts.publicBaseUrl),
    defs: Object.fromEntries(events.map((e) => [eventSchemaName(e.type), eventEnvelope(e)])),
    title: API_TITLE,
    version: API_VERSION,
    description: [API_DESCRIPTION, guidesMarkdown(listGuides(), opts.publicBaseUrl)]
      .filter(Boolean)
      .join('\n\n'),
    baseUrl: opts.publicBaseUrl ? `${opts.publicBaseUrl.replace(/\/$/, '')}/v1` : '/v1',
    securitySchemes: {
      [SECURITY_SCHEME]: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'JWT',
        description:
          'Access token from `POST /auth/login`, `/auth/register` or `/auth/refresh`: a JWT signed with HS256 only ' +
          '(the algorithm is fixed, never read from the token), with `exp`, checked on every request, as RFC8725 ' +
          '(JSON Web Token Best Current Practices) asks.',
      },
      [API_KEY_SCHEME]: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'sk_…',
        description:
          'API key from `POST /api-keys` (`sk_…`), sent as the bearer token: the permissions listed on the key ' +
          'that its creator still holds',
      },
    },
  });
  if (doc.servers?.[0]) {
    doc.servers[0].description =
      'This API, in the environment that serves this document (production or other)';
    // Public: third parties call it (OWASP API9, inventory).
    (doc.servers[0] as unknown as Json)['x-internal'] = false;
  }
  doc.security = [{ [SECURITY_SCHEME]: [] }];

  const components = (doc.components ??= {});
  components.schemas = { ...(components.schemas ?? {}), Error: structuredClone(ERROR_SCHEMA) };
  components.headers = structuredClone(HEADERS);
  components.parameters = Object.fromEntries(
    Object.entries(DELIVERY_HEADERS).map(([key, h]) => [key, { in: 'header', required: true, ...h }]),
  ) as never;
  if (events.length > 0) (doc as unknown as Json).webhooks = webhooksSection(events);
  // Shared error responses, added as operations use them (one per status, codes and rate-limit headers).
  const responses: Json = {};
  components.responses = responses as never;
  (components as Json).parameters = {
    ...((components as Json).parameters as Json | undefined),
    IdempotencyKey: {
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        'Makes the request safe to retry: its first answer is kept 24 hours and replayed (with ' +
        '`Idempotent-Replayed: true`) for a repeat by the same caller (user or API key) with the same key, ' +
        'method, path and body; another caller’s use of the key is a request of its own. The same caller’s key ' +
        'with another request is 422; while the first is still running, 409.',
      schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7E]+$' },
      example: '5f0c6b0e-8d7e-4a51-b1d4-2f1f5b9a6c3e',
    },
  };

  const byOperation = new Map<string, { meta: Meta; path: string }>();
  const procedures = router._def.procedures as Record<string, AnyTRPCProcedure>;
  for (const [procPath, proc] of Object.entries(procedures)) {
    const meta = proc._def.meta as Meta | undefined;
    if (!meta?.openapi || meta.openapi.enabled === false) continue;
    byOperation.set(`${meta.openapi.method.toLowerCase()} ${normalizePath(meta.openapi.path)}`, {
      meta,
      path: procPath,
    });
  }

  const usedTags: string[] = [];
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(item as Record<string, Json>)) {
      const found = byOperation.get(`${method} ${path}`);
      if (!found || typeof op !== 'object' || !op.responses) continue;
      const { meta } = found;
      if (!meta.openapi?.operationId) op.operationId = operationIdOf(found.path);
      if (meta.deleteWithBody && method === 'delete') queryToBody(op);
      if (BODY_METHODS.has(method) || meta.deleteWithBody) {
        declareStrictBody(op, procedureInputIsStrict(procedures[found.path]!));
      }
      describeParameters(op);
      const isPublic = meta.auth === 'public' || (meta.auth === undefined && meta.openapi?.protect === false);
      op.security = isPublic
        ? []
        : isClosedToApiKeys(found.path, meta)
          ? [{ [SECURITY_SCHEME]: [] }]
          : [{ [SECURITY_SCHEME]: [] }, { [API_KEY_SCHEME]: [] }];
      const idempotent = takesIdempotencyKey(meta);
      if (idempotent) {
        op.parameters = [
          ...((op.parameters as Json[] | undefined) ?? []),
          { $ref: '#/components/parameters/IdempotencyKey' },
        ];
      }
      for (const tag of (op.tags as string[] | undefined) ?? [])
        if (!usedTags.includes(tag)) usedTags.push(tag);

      // A body schema without fields (`{}`) may be left out altogether.
      const body = op.requestBody as Json | undefined;
      const bodySchema = (body?.content as Record<string, Json> | undefined)?.['application/json']?.schema as
        Json | undefined;
      if (body && bodySchema && Object.keys((bodySchema.properties as Json | undefined) ?? {}).length === 0) {
        body.required = false;
      }

      const oldResponses = op.responses as Record<string, Json>;
      const status = meta.successStatus ?? 200;
      const ok = oldResponses['200'] ?? { content: {} };
      const successHeaders: Json = { 'X-Request-Id': headerRef('RequestId') };
      if (status === 201) successHeaders.Location = headerRef('Location');
      if (!isPublic) {
        successHeaders['RateLimit-Policy'] = headerRef('RateLimitPolicy');
        successHeaders.RateLimit = headerRef('RateLimit');
      }
      if (idempotent) successHeaders['Idempotent-Replayed'] = headerRef('IdempotentReplayed');
      const successDescription =
        meta.openapi?.successDescription ??
        {
          200: 'OK',
          201: 'Created; `Location` is the URL of the new resource',
          202: 'Accepted; the work goes on in the background',
        }[status];
      const content = meta.eventStream
        ? {
            ...(ok.content as Json),
            'text/event-stream': {
              schema: {
                type: 'string',
                description: 'Server-Sent Events, when asked for with `Accept: text/event-stream`',
              },
            },
          }
        : ok.content;
      const newResponses: Record<string, Json> = {
        [String(status)]: { description: successDescription, headers: successHeaders, content },
      };
      // Whether the procedure reads input is decided as the /v1 adapter decides it.
      const takesInput = procedureTakesInput(procedures[found.path]!);
      const declaredByStatus = declaredErrors(meta, method, op, takesInput);
      // An Idempotency-Key is refused while its first request runs (409) and when reused for another one (422).
      if (idempotent) addIdempotencyErrors(declaredByStatus);
      for (const [code, declared] of declaredByStatus) {
        const rateLimited = !isPublic;
        if (declared.reasons.length > 0) {
          const description = declared.reasons.join('; ');
          newResponses[String(code)] = errorResponse(code, {
            description,
            codes: declared.codes,
            rateLimited,
          });
          continue;
        }
        const name = errorResponseName(code, declared.codes, rateLimited);
        responses[name] ??= errorResponse(code, { codes: declared.codes, rateLimited });
        newResponses[String(code)] = { $ref: `#/components/responses/${name}` };
      }
      op.responses = newResponses;
    }
  }

  doc.tags = usedTags.map((name) => ({
    name,
    description: TAG_DESCRIPTIONS[name] ?? `Operations on ${name.toLowerCase()}.`,
  }));

  addCorsHeader(doc);
  polishSchema(doc.paths);
  polishSchema(components.schemas);
  pruneUnusedComponents(doc);
  return doc;
}
