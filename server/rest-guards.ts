import type { AnyTRPCProcedure } from '@trpc/server';
import type { FastifyRequest } from 'fastify';
import { AppError } from './lib/errors.js';
import type { Meta } from './trpc/init.js';

/**
 * The REST adapter merges path parameters into the body (`PUT /users/{id}` with `{"id": ...}` in the body), and
 * the path wins silently. A body that names a path parameter is refused instead (400, as for any unknown field),
 * so that sending `id` in a body can never look like it was accepted.
 *
 * Returns a Fastify `preHandler` hook for the `/v1` scope.
 */
export function rejectPathParamsInBody(procedures: Record<string, AnyTRPCProcedure>, basePath = '/v1') {
  const routes: { method: string; pattern: RegExp; params: string[] }[] = [];
  for (const proc of Object.values(procedures)) {
    const openapi = (proc._def.meta as Meta | undefined)?.openapi;
    if (!openapi || !openapi.path.includes('{')) continue;
    const params = [...openapi.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
    const source = openapi.path
      .split(/\{[^}]+\}/)
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]+');
    routes.push({ method: openapi.method, pattern: new RegExp(`^${basePath}${source}/?$`), params });
  }

  return async (req: FastifyRequest): Promise<void> => {
    const body = req.body;
    if (!body || typeof body !== 'object' || Array.isArray(body)) return;
    const path = req.url.split('?')[0]!;
    for (const route of routes) {
      if (route.method !== req.method || !route.pattern.test(path)) continue;
      const clash = route.params.filter((p) => Object.hasOwn(body, p));
      if (clash.length === 0) return;
      throw new AppError(
        'VALIDATION_ERROR',
        `Invalid request: ${clash[0]}: Unknown field (it is part of the path)`,
        {
          details: clash.map((p) => ({ path: p, message: 'Unknown field (it is part of the path)' })),
        },
      );
    }
  };
}

type ZodLike = { _zod?: { def?: Record<string, unknown> }; def?: Record<string, unknown> };
const COERCIBLE = new Set(['number', 'boolean', 'bigint', 'date']);

function lockCoercion(schema: unknown, seen: Set<unknown>): void {
  if (!schema || typeof schema !== 'object' || seen.has(schema)) return;
  seen.add(schema);
  const def = (schema as ZodLike)._zod?.def ?? (schema as ZodLike).def;
  if (!def) return;
  const type = def.type as string | undefined;
  if (type && COERCIBLE.has(type)) {
    const declared = def.coerce === true;
    Object.defineProperty(def, 'coerce', {
      get: () => declared,
      set: () => {},
      configurable: false,
      enumerable: declared,
    });
    return;
  }
  if (type === 'object') {
    for (const child of Object.values((def.shape ?? {}) as Record<string, unknown>))
      lockCoercion(child, seen);
    return;
  }
  for (const key of ['innerType', 'element', 'in', 'out', 'valueType', 'left', 'right'])
    lockCoercion(def[key], seen);
  if (Array.isArray(def.options)) for (const o of def.options) lockCoercion(o, seen);
}

/**
 * trpc-to-openapi switches `coerce` on, in place, for every number, boolean, bigint and date field of a procedure's
 * input when it serves a REST call: in bodies too, where it turns `"false"` into `true`, and then for `/trpc`
 * callers as well, since the schema object is shared. Locking each field's `coerce` flag to what the schema
 * declared keeps REST and `/trpc` identical: a query field that should accept strings says so (`z.coerce.number()`),
 * and a JSON body field means exactly its JSON type.
 */
export function lockInputCoercion(procedures: Record<string, AnyTRPCProcedure>): void {
  const seen = new Set<unknown>();
  for (const proc of Object.values(procedures)) {
    for (const input of (proc._def as { inputs?: unknown[] }).inputs ?? []) lockCoercion(input, seen);
  }
}
