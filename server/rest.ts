import { callTRPCProcedure, type AnyTRPCProcedure, type AnyTRPCRouter } from '@trpc/server';
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { AppError, unsupportedMediaType } from './lib/errors.js';
import type { Context } from './trpc/context.js';
import type { Meta } from './trpc/init.js';

/**
 * `/v1`: every procedure with `meta.openapi` answered as a Fastify route at its exact path, the same path, method and
 * input rules from which trpc-to-openapi generates the OpenAPI document (server/openapi.ts).
 *
 * trpc-to-openapi's own request handler is not used for serving: per call it built a Fetch `Request` with an
 * `AbortController` and aborted it once answered, rebound a dozen methods onto Fastify's reply and request, scanned
 * every route's regular expression, and walked the input schema to switch on coercion in place. Measured on
 * `GET /v1/auth/me`: half of the server's CPU per request, and per-request objects promoted to the old generation
 * at about 10 KB a request (RSS 250–440 MB under load, against 180 MB now). This adapter keeps its semantics:
 * - the input is the query (GET, DELETE) or the JSON body (POST, PUT, PATCH), merged with the path parameters;
 *   a query key given once is a string, repeated an array; a key with an empty value is absent; a single value for
 *   an array field is a one-element array;
 * - the success status is the procedure's `meta.successStatus` (201, 202) or 200; headers a procedure set on
 *   `ctx.response` are sent with the answer, errors included.
 * It differs where the library's behaviour was a defect: a body naming a path parameter is refused (the path
 * silently won), a JSON body that is not an object is refused (`null` passed as `{}`), input types are never
 * coerced beyond what a schema declares, and a static path segment wins over a parameter (Fastify's router).
 */
export interface RestRoute {
  /** The procedure's path in the router (`vpn.connections.create`). */
  procedurePath: string;
  type: 'query' | 'mutation';
  method: HTTPMethods;
  /** The documented path, `/vpn/connections/{id}`. */
  openapiPath: string;
  /** The path parameters, in order. */
  params: string[];
  /** Whether the procedure reads an input (false for void-like input schemas). */
  takesInput: boolean;
  /** Where the input comes from besides the path. */
  source: 'query' | 'body';
  /** Input fields declared as arrays (a single query value becomes a one-element array). */
  arrayFields: ReadonlySet<string>;
  successStatus: number;
  /** `meta.location`: the created resource's path template. */
  location: string | undefined;
}

type ZodLike = { _zod?: { def?: ZodDef } };
interface ZodDef {
  type?: string;
  innerType?: ZodLike;
  in?: ZodLike;
  shape?: Record<string, ZodLike>;
}

function defOf(schema: unknown): ZodDef | undefined {
  return (schema as ZodLike | undefined)?._zod?.def;
}

/** Optional, nullable, default, catch, readonly and pipe wrappers removed. */
function unwrap(schema: unknown): ZodDef | undefined {
  let def = defOf(schema);
  for (let i = 0; def && i < 16; i++) {
    if (def.innerType) def = defOf(def.innerType);
    else if (def.type === 'pipe' && def.in) def = defOf(def.in);
    else break;
  }
  return def;
}

const VOID_LIKE = new Set(['void', 'undefined', 'never']);

/** The `/v1` routes of `router`: one per procedure whose meta has `openapi`. */
export function restRoutes(router: AnyTRPCRouter): RestRoute[] {
  const procedures = router._def.procedures as Record<string, AnyTRPCProcedure>;
  const routes: RestRoute[] = [];
  for (const [procedurePath, proc] of Object.entries(procedures)) {
    const meta = proc._def.meta as Meta | undefined;
    const openapi = meta?.openapi;
    if (!openapi || (openapi as { enabled?: boolean }).enabled === false) continue;
    const type = proc._def.type;
    if (type !== 'query' && type !== 'mutation') continue;
    const inputs = (proc._def as { inputs?: unknown[] }).inputs ?? [];
    const input = inputs.length > 0 ? unwrap(inputs[inputs.length - 1]) : undefined;
    const arrayFields = new Set<string>();
    for (const [name, field] of Object.entries(input?.shape ?? {})) {
      if (unwrap(field)?.type === 'array') arrayFields.add(name);
    }
    const method = openapi.method.toUpperCase();
    const route: RestRoute = {
      procedurePath,
      type,
      method,
      openapiPath: openapi.path,
      params: [...openapi.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!),
      takesInput: input !== undefined && !VOID_LIKE.has(input.type ?? ''),
      source: method === 'POST' || method === 'PUT' || method === 'PATCH' ? 'body' : 'query',
      arrayFields,
      successStatus: meta.successStatus ?? 200,
      location: meta.location,
    };
    routes.push(route);
    if (route.successStatus === 201 && !route.location) {
      throw new Error(`${procedurePath}: a 201 procedure needs meta.location (the created resource's path)`);
    }
  }
  return routes;
}

function queryInput(query: unknown, arrayFields: ReadonlySet<string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!query || typeof query !== 'object') return out;
  for (const [key, value] of Object.entries(query as Record<string, unknown>)) {
    if (value === undefined || value === '') continue;
    if (Array.isArray(value)) out[key] = value.length === 1 && !arrayFields.has(key) ? value[0] : value;
    else out[key] = arrayFields.has(key) ? [value] : value;
  }
  return out;
}

function bodyInput(req: FastifyRequest, params: readonly string[]): Record<string, unknown> {
  // Fastify also parses text/plain; the API speaks JSON only (a bodiless request was given `{}` as JSON already).
  if (!req.headers['content-type']?.startsWith('application/json')) throw unsupportedMediaType();
  const body = req.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new AppError('VALIDATION_ERROR', 'Invalid request: the request body must be a JSON object', {
      details: [{ path: '', message: 'Expected a JSON object' }],
    });
  }
  const clash = params.filter((p) => Object.hasOwn(body, p));
  if (clash.length > 0) {
    throw new AppError(
      'VALIDATION_ERROR',
      `Invalid request: ${clash[0]}: Unknown field (it is part of the path)`,
      {
        details: clash.map((p) => ({ path: p, message: 'Unknown field (it is part of the path)' })),
      },
    );
  }
  return body as Record<string, unknown>;
}

/**
 * Fills a `meta.location` template from the procedure's output: `/vpn/connections/{connection.id}` with
 * `{connection: {id: 'vpn_1'}}` gives `/vpn/connections/vpn_1`.
 */
export function resolveLocation(template: string, output: unknown): string {
  return template.replace(/\{([\w.]+)\}/g, (_, path: string) => {
    let value: unknown = output;
    for (const key of path.split('.')) value = (value as Record<string, unknown> | undefined)?.[key];
    if (typeof value !== 'string' && typeof value !== 'number') {
      throw new Error(`Location template ${template}: the output has no ${path}`);
    }
    return encodeURIComponent(String(value));
  });
}

export interface RestOptions {
  router: AnyTRPCRouter;
  /** `/v1`. */
  basePath: string;
  /** Absolute URL that `Location` paths are relative to (`PUBLIC_BASE_URL` + `/v1`). */
  locationBase: string;
  createContext(req: FastifyRequest): Context;
  /** Sends an error in the envelope (and logs it when unexpected); `ctx` is undefined if it could not be made. */
  sendError(req: FastifyRequest, reply: FastifyReply, err: unknown, ctx: Context | undefined): FastifyReply;
}

/** Registers one Fastify route per `/v1` operation. */
export function registerRestRoutes(app: FastifyInstance, opts: RestOptions): RestRoute[] {
  const routes = restRoutes(opts.router);
  for (const route of routes) {
    const url = opts.basePath + route.openapiPath.replace(/\{([^}]+)\}/g, ':$1');
    app.route({
      method: route.method,
      url,
      handler: async (req, reply) => {
        let ctx: Context | undefined;
        try {
          // Bodies are checked even where the procedure reads no input: JSON objects only, on every route.
          const source =
            route.source === 'body' ? bodyInput(req, route.params) : queryInput(req.query, route.arrayFields);
          const input = route.takesInput
            ? { ...source, ...(req.params as Record<string, string>) }
            : undefined;
          ctx = opts.createContext(req);
          const data: unknown = await callTRPCProcedure({
            router: opts.router,
            path: route.procedurePath,
            type: route.type,
            ctx,
            getRawInput: async () => input,
            signal: undefined,
            batchIndex: 0,
          });
          if (route.location) {
            ctx.response.headers.Location = opts.locationBase + resolveLocation(route.location, data);
          }
          // A reply is thenable, but settles only once the response has gone out: it is returned (Fastify's sign
          // that the handler sent it), not awaited, and nothing it could reject with is for the catch below.
          // eslint-disable-next-line @typescript-eslint/return-await
          return reply.status(route.successStatus).headers(ctx.response.headers).send(data);
        } catch (err) {
          return opts.sendError(req, reply, err, ctx);
        }
      },
    });
  }
  return routes;
}
