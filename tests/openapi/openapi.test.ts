// Test tier: unit
import type { AnyTRPCProcedure } from '@trpc/server';
import { expect } from 'chai';
import { z } from 'zod';
import { buildOpenApiDocument } from '../../server/openapi.js';
import { EVENT_TYPES } from '../../server/events/event-types.js';
import { appRouter } from '../../server/router.js';
import { router, type Meta } from '../../server/trpc/init.js';
import { authedProcedure, publicProcedure, requirePermission } from '../../server/trpc/procedures.js';

type Json = Record<string, any>;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/** Follows a local `$ref` (`#/components/...`) once. */
function deref(doc: Json, node: Json): Json {
  if (typeof node?.$ref !== 'string') return node;
  return node.$ref
    .slice(2)
    .split('/')
    .reduce((acc: Json, key: string) => acc?.[key], doc);
}

function operations(doc: Json): { path: string; method: string; op: Json }[] {
  const out: { path: string; method: string; op: Json }[] = [];
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    for (const method of METHODS) if (item[method]) out.push({ path, method, op: item[method] });
  }
  return out;
}

function openApiProcedures(r: { _def: { procedures: unknown } }) {
  return Object.entries(r._def.procedures as Record<string, AnyTRPCProcedure>)
    .map(([name, p]) => ({ name, meta: p._def.meta as Meta | undefined }))
    .filter((p) => p.meta?.openapi);
}

describe('OpenAPI document', () => {
  // Serialized and parsed back: what a client downloads.
  const doc: Json = JSON.parse(JSON.stringify(buildOpenApiDocument({ publicBaseUrl: 'https://api.test' })));

  it('is an OpenAPI 3.1 document with the /v1 server and bearer security', () => {
    expect(doc.openapi).to.equal('3.1.0');
    expect(doc.info.title).to.be.a('string').and.not.empty;
    expect(doc.servers).to.have.length(1);
    expect(doc.servers[0]).to.include({ url: 'https://api.test/v1', 'x-internal': false });
    expect(doc.info.contact).to.deep.equal({ name: 'Cloud Platform API team', url: 'https://api.test/docs' });
    expect(doc.components.securitySchemes.bearerAuth).to.include({ type: 'http', scheme: 'bearer' });
    expect(doc.security).to.deep.equal([{ bearerAuth: [] }]);
  });

  it('documents every procedure with meta.openapi at its method and path, with a unique operationId', () => {
    const procs = openApiProcedures(appRouter);
    expect(procs.length).to.be.greaterThan(0);
    const ids = new Set<string>();
    for (const { name, meta } of procs) {
      const path = meta!.openapi!.path.replace(/:(\w+)/g, '{$1}');
      const op = doc.paths[path]?.[meta!.openapi!.method.toLowerCase()];
      expect(op, `${name}: ${meta!.openapi!.method} ${path}`).to.be.an('object');
      expect(op.summary, `${name} summary`).to.be.a('string').and.not.empty;
      expect(op.description, `${name} description`).to.be.a('string').and.not.empty;
      expect(op.tags, `${name} tags`).to.be.an('array').that.is.not.empty;
      expect(op.operationId).to.match(/^[A-Za-z][A-Za-z0-9]*$/);
      expect(ids.has(op.operationId), `duplicate operationId ${op.operationId}`).to.equal(false);
      ids.add(op.operationId);
    }
    expect(operations(doc)).to.have.length(procs.length);
  });

  it('answers 201 with a Location header for creates and 202 for accepted actions, 200 otherwise', () => {
    for (const { name, meta } of openApiProcedures(appRouter)) {
      const path = meta!.openapi!.path.replace(/:(\w+)/g, '{$1}');
      const op = doc.paths[path][meta!.openapi!.method.toLowerCase()];
      const status = String(meta!.successStatus ?? 200);
      const success = Object.keys(op.responses).filter((s) => s.startsWith('2'));
      expect(success, name).to.deep.equal([status]);
      const headers = op.responses[status].headers;
      expect(deref(doc, headers['X-Request-Id']).schema, name).to.deep.equal({ type: 'string' });
      if (status === '201') expect(deref(doc, headers.Location), name).to.include({ required: true });
      else expect(headers.Location, name).to.equal(undefined);
    }
  });

  it('gives every error response the envelope schema and the standard headers', () => {
    const error = doc.components.schemas.Error;
    expect(error.required).to.deep.equal(['success', 'error']);
    expect(error.properties.error.required).to.deep.equal(['code', 'message', 'request_id']);
    expect(error.properties.error.properties.code.enum).to.include.members([
      'VALIDATION_ERROR',
      'NOT_FOUND',
      'RATE_LIMITED',
    ]);
    for (const { path, method, op } of operations(doc)) {
      const errors = Object.keys(op.responses).filter((s) => Number(s) >= 400);
      expect(errors, `${method} ${path}`).to.include('500');
      for (const status of errors) {
        const res = deref(doc, op.responses[status]);
        expect(res.content['application/json'].schema, `${method} ${path} ${status}`).to.deep.equal({
          $ref: '#/components/schemas/Error',
        });
        expect(res.headers['X-Request-Id']).to.deep.equal({ $ref: '#/components/headers/RequestId' });
        if (status === '429') expect(deref(doc, res.headers['Retry-After'])).to.include({ required: true });
        if (status === '401') expect(res.headers['WWW-Authenticate']).to.be.an('object');
      }
    }
  });

  it('marks public operations as needing no token and documents 401 and RateLimit on the others', () => {
    for (const { name, meta } of openApiProcedures(appRouter)) {
      const path = meta!.openapi!.path.replace(/:(\w+)/g, '{$1}');
      const op = doc.paths[path][meta!.openapi!.method.toLowerCase()];
      const success = op.responses[String(meta!.successStatus ?? 200)];
      if (meta!.auth === 'public') {
        expect(op.security, name).to.deep.equal([]);
        expect(success.headers.RateLimit, name).to.equal(undefined);
      } else {
        // API keys are listed where they are accepted: not on role-gated operations or the closed prefixes.
        const closed = meta!.auth === 'role' || /^(auth|apiKeys|users|webhooks|audit)\./.test(name);
        expect(op.security, name).to.deep.equal(
          closed ? [{ bearerAuth: [] }] : [{ bearerAuth: [] }, { apiKeyAuth: [] }],
        );
        expect(op.responses, name).to.include.keys('401', '429');
        // Every answer to a token carries the burst headers, errors included.
        for (const [status, response] of Object.entries(op.responses as Json)) {
          expect(deref(doc, response).headers, `${name} ${status}`).to.include.keys(
            'RateLimit',
            'RateLimit-Policy',
          );
        }
      }
    }
    expect(doc.components.securitySchemes.apiKeyAuth).to.include({ type: 'http', scheme: 'bearer' });
  });

  it('documents Idempotency-Key and Idempotent-Replayed on every authenticated POST and the subscription change', () => {
    const param = doc.components.parameters.IdempotencyKey;
    expect(param).to.include({ name: 'Idempotency-Key', in: 'header', required: false });
    for (const { name, meta } of openApiProcedures(appRouter)) {
      const path = meta!.openapi!.path.replace(/:(\w+)/g, '{$1}');
      const method = meta!.openapi!.method;
      const op = doc.paths[path][method.toLowerCase()];
      const success = op.responses[String(meta!.successStatus ?? 200)];
      const takes =
        meta!.auth !== 'public' &&
        (method === 'POST' || (method === 'PUT' && path === '/billing/subscription'));
      const refs = ((op.parameters ?? []) as Json[]).map((p) => p.$ref);
      if (takes) {
        expect(refs, name).to.include('#/components/parameters/IdempotencyKey');
        expect(success.headers['Idempotent-Replayed'], name).to.deep.equal({
          $ref: '#/components/headers/IdempotentReplayed',
        });
        expect(op.responses, name).to.include.keys('409', '422');
      } else {
        expect(refs, name).to.not.include('#/components/parameters/IdempotencyKey');
        expect(success.headers['Idempotent-Replayed'], name).to.equal(undefined);
      }
    }
  });

  it('declares the errors each service answers, with their codes', () => {
    const expectations: [string, string, string, string][] = [
      ['post', '/auth/login', '401', 'INVALID_CREDENTIALS'],
      ['post', '/auth/login', '429', 'TOO_MANY_LOGIN_ATTEMPTS'],
      ['post', '/auth/refresh', '401', 'INVALID_CREDENTIALS'],
      ['post', '/auth/invitations/accept', '401', 'INVALID_CREDENTIALS'],
      ['post', '/auth/register', '409', 'CONFLICT'],
      ['post', '/users', '409', 'CONFLICT'],
      ['put', '/users/{id}', '409', 'CONFLICT'],
      ['post', '/auth/2fa/verify', '401', 'INVALID_CREDENTIALS'],
    ];
    for (const [method, path, status, code] of expectations) {
      const response = deref(doc, doc.paths[path][method].responses[status]);
      expect(response, `${method} ${path} ${status}`).to.be.an('object');
      expect(response.description).to.include(`\`${code}\``);
    }
    // The 401 of a public operation lists its own code, not the token codes it cannot answer.
    expect(deref(doc, doc.paths['/auth/login'].post.responses['401']).description).not.to.include(
      'TOKEN_EXPIRED',
    );
    expect(deref(doc, doc.paths['/auth/login'].post.responses['429']).headers['Retry-After']).to.be.an(
      'object',
    );
  });

  it('states the password rule (8 to 72 bytes) wherever a new password is taken', () => {
    for (const path of ['/auth/register', '/auth/invitations/accept']) {
      const password =
        doc.paths[path].post.requestBody.content['application/json'].schema.properties.password;
      // Characters: a UTF-8 character takes 1 to 4 bytes, so 8 to 72 bytes is 2 to 72 characters.
      expect(password, path).to.include({ type: 'string', minLength: 2, maxLength: 72 });
      expect(password.description, path).to.match(/8 to 72 bytes of UTF-8/);
    }
    const login =
      doc.paths['/auth/login'].post.requestBody.content['application/json'].schema.properties.password;
    expect(login).to.include({ minLength: 1, maxLength: 72 });
  });

  it('offers only the roles POST /users and PUT /users/{id} may give', () => {
    for (const [method, path] of [
      ['post', '/users'],
      ['put', '/users/{id}'],
    ] as const) {
      const role = doc.paths[path][method].requestBody.content['application/json'].schema.properties.role;
      expect(role.enum, `${method} ${path}`).to.deep.equal(['admin', 'member']);
    }
  });

  it('declares webhook URLs as URIs and bounds every path parameter (ids: 64 characters; domains: 253)', () => {
    const body = (path: string, method: string) =>
      doc.paths[path][method].requestBody.content['application/json'].schema.properties;
    expect(body('/webhooks', 'post').url).to.include({ format: 'uri', maxLength: 2048 });
    expect(body('/webhooks/{id}', 'put').url).to.include({ format: 'uri' });
    expect(doc.components.schemas.WebhookDetail.properties.url).to.include({ format: 'uri' });
    for (const { path, method, op } of operations(doc)) {
      for (const param of (op.parameters ?? []) as Json[]) {
        if (param.in !== 'path') continue;
        const maxLength = param.name === 'domain' ? 253 : 64;
        expect(param.schema, `${method} ${path} ${param.name}`).to.include({ minLength: 1, maxLength });
      }
    }
  });

  it('answers with the same enums it takes: webhook events, user permissions, delivery event types', () => {
    const requestBody = (path: string, method: string) =>
      doc.paths[path][method].requestBody.content['application/json'].schema.properties;
    const events = requestBody('/webhooks', 'post').events.items.enum;
    expect(doc.components.schemas.WebhookDetail.properties.events.items.enum).to.deep.equal(events);
    expect(doc.components.schemas.WebhookSummary.properties.events.items.enum).to.deep.equal(events);
    const permissions = requestBody('/users/{id}', 'put').permissions.items.enum;
    expect(doc.components.schemas.UserOutput.properties.permissions.items.enum).to.deep.equal(permissions);
    expect(doc.components.schemas.UserSummaryOutput.properties.permissions.items.enum).to.deep.equal(
      permissions,
    );
    const eventType = requestBody('/webhooks/{id}/test', 'post').event_type.enum;
    expect(doc.components.schemas.WebhookDelivery.properties.event_type.enum).to.deep.equal(eventType);
  });

  it('describes every event of the catalogue as an OpenAPI webhook: the envelope, its data.object and the signature headers', () => {
    expect(Object.keys(doc.webhooks).sort()).to.deep.equal([...EVENT_TYPES].sort());
    for (const type of EVENT_TYPES) {
      const op = doc.webhooks[type].post;
      expect(op.description, type).to.be.a('string').and.not.empty;
      const envelope = deref(doc, op.requestBody.content['application/json'].schema);
      expect(envelope.required, type).to.have.members([
        'id',
        'type',
        'created_at',
        'organization_id',
        'data',
      ]);
      expect(envelope.properties.type.const).to.equal(type);
      expect(envelope.properties.data.required).to.deep.equal(['object']);
      const headers = (op.parameters as Json[]).map((p) => deref(doc, p)).map((p) => `${p.in}:${p.name}`);
      expect(headers).to.include.members([
        'header:X-VPN-Signature',
        'header:X-VPN-Event',
        'header:X-VPN-Delivery',
        'header:webhook-id',
        'header:webhook-timestamp',
        'header:webhook-signature',
      ]);
    }
    // data.object is the resource's API view: the same component as the REST answer.
    const objectRef = (type: string) =>
      deref(doc, doc.webhooks[type].post.requestBody.content['application/json'].schema).properties.data
        .properties.object.$ref;
    const userView =
      doc.paths['/users/{id}'].get.responses['200'].content['application/json'].schema.properties.user;
    expect(objectRef('user.created')).to.equal(userView.$ref);
    expect(objectRef('user.updated')).to.equal(userView.$ref);
  });

  it('declares every tag it uses, with a description', () => {
    const declared = new Map((doc.tags as Json[]).map((t) => [t.name, t.description]));
    for (const { op } of operations(doc)) {
      for (const tag of op.tags) expect(declared.get(tag), tag).to.be.a('string').and.not.empty;
    }
  });

  it('leaves no component unused (the generator’s own error shapes are gone)', () => {
    const text = JSON.stringify(doc.paths) + JSON.stringify(doc.components.responses ?? {});
    for (const name of Object.keys(doc.components.schemas)) {
      expect(name).not.to.match(/^error\./);
      expect(JSON.stringify(doc)).to.include(`"#/components/schemas/${name}"`);
    }
    for (const name of Object.keys(doc.components.responses ?? {})) {
      expect(text).to.include(`"#/components/responses/${name}"`);
    }
  });
});

describe('OpenAPI post-processing (driven by procedure meta)', () => {
  const ZItem = z.object({ id: z.string(), created_at: z.string(), count: z.number().int() });
  const fixture = router({
    items: router({
      list: authedProcedure
        .meta({ openapi: { method: 'GET', path: '/items', tags: ['Items'], summary: 'List items' } })
        .input(
          z.object({
            page: z.coerce.number().int().min(1).default(1).describe('Page number'),
            kind: z.enum(['a', 'b']).optional(),
          }),
        )
        .output(z.object({ success: z.literal(true), items: z.array(ZItem) }))
        .query(() => ({ success: true as const, items: [] })),
      create: requirePermission('vpn:write')
        .meta({
          openapi: {
            method: 'POST',
            path: '/items',
            tags: ['Items'],
            summary: 'Create an item',
            errorResponses: { 402: 'Plan limit reached', 409: 'Duplicate name' },
          },
          successStatus: 201,
        })
        .input(z.strictObject({ name: z.string() }))
        .output(z.object({ success: z.literal(true), item: ZItem }))
        .mutation(() => ({ success: true as const, item: { id: 'x', created_at: '', count: 1 } })),
      rebuild: requirePermission('vpn:write')
        .meta({
          openapi: { method: 'POST', path: '/items/{id}/rebuild', tags: ['Items'], summary: 'Rebuild' },
          successStatus: 202,
        })
        .input(z.strictObject({ id: z.string() }))
        .output(z.object({ success: z.literal(true) }))
        .mutation(() => ({ success: true as const })),
      ping: publicProcedure
        .meta({ openapi: { method: 'GET', path: '/ping', tags: ['Health'], summary: 'Ping' } })
        .output(z.object({ success: z.literal(true) }))
        .query(() => ({ success: true as const })),
      internal: publicProcedure.output(z.object({ ok: z.boolean() })).query(() => ({ ok: true })),
    }),
  });
  const doc: Json = JSON.parse(JSON.stringify(buildOpenApiDocument({ router: fixture })));

  it('uses a relative server URL without PUBLIC_BASE_URL and skips procedures without meta.openapi', () => {
    expect(doc.servers[0].url).to.equal('/v1');
    expect(Object.keys(doc.paths).sort()).to.deep.equal(['/items', '/items/{id}/rebuild', '/ping']);
  });

  it('maps successStatus to 201 (with Location) and 202, and names operations after the procedure', () => {
    const create = doc.paths['/items'].post;
    expect(create.operationId).to.equal('itemsCreate');
    expect(Object.keys(create.responses)).to.include('201').and.not.include('200');
    expect(create.responses['201'].headers.Location).to.deep.equal({ $ref: '#/components/headers/Location' });
    expect(create.responses['201'].content['application/json'].schema.properties.item).to.be.an('object');
    const rebuild = doc.paths['/items/{id}/rebuild'].post;
    expect(Object.keys(rebuild.responses)).to.include('202').and.not.include('200');
    expect(rebuild.responses['202'].headers.Location).to.equal(undefined);
  });

  it('derives error statuses from auth, path and method, plus meta.openapi.errorResponses', () => {
    const statuses = (op: Json) => Object.keys(op.responses).map(Number);
    expect(statuses(doc.paths['/items'].get)).to.deep.equal([200, 400, 401, 403, 429, 500, 503]);
    // An authenticated POST takes an Idempotency-Key: 409 (in flight) and 422 (reused) too.
    expect(statuses(doc.paths['/items'].post)).to.deep.equal([
      201, 400, 401, 402, 403, 409, 413, 415, 422, 429, 500, 503,
    ]);
    expect(doc.paths['/items'].post.responses['409'].description).to.match(/^Duplicate name/);
    expect(doc.paths['/items'].post.responses['409'].content['application/json'].schema).to.deep.equal({
      $ref: '#/components/schemas/Error',
    });
    expect(statuses(doc.paths['/items/{id}/rebuild'].post)).to.include(404);
    expect(statuses(doc.paths['/ping'].get)).to.deep.equal([200, 500, 503]);
    expect(doc.paths['/ping'].get.security).to.deep.equal([]);
  });

  it('documents query parameters with descriptions, enums and coerced integers', () => {
    const params = doc.paths['/items'].get.parameters as Json[];
    const page = params.find((p) => p.name === 'page')!;
    expect(page).to.include({ in: 'query', description: 'Page number' });
    expect(page.schema).to.include({ type: 'integer', minimum: 1, default: 1 });
    const kind = params.find((p) => p.name === 'kind')!;
    expect(kind.schema.enum).to.deep.equal(['a', 'b']);
    expect(kind.description).to.be.a('string').and.not.empty;
    const id = (doc.paths['/items/{id}/rebuild'].post.parameters as Json[]).find((p) => p.name === 'id')!;
    expect(id).to.include({ in: 'path', required: true });
  });

  it('describes well-known fields and marks *_at strings as date-times', () => {
    const item = doc.paths['/items'].post.responses['201'].content['application/json'].schema.properties.item;
    expect(item.properties.created_at).to.include({ format: 'date-time' });
    expect(item.properties.id.description).to.be.a('string');
    expect(item.properties.count).not.to.have.any.keys('minimum', 'maximum');
  });

  it('declares the tags in order of use', () => {
    expect((doc.tags as Json[]).map((t) => t.name)).to.deep.equal(['Items', 'Health']);
  });
});
