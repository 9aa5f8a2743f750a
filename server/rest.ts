import { callTRPCProcedure, type AnyTRPCProcedure, type AnyTRPCRouter } from '@trpc/server';
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { invalidInput, unsupportedMediaType, validation } from './lib/errors.js';
import {
  acceptsEventStream,
  EVENT_STREAM_HEARTBEAT_MS,
  formatStreamEvent,
  type EventSink,
  type EventStreamRequest,
} from './lib/event-stream.js';
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
 *   `ctx.response` are sent with the answer, errors included;
 * - a procedure with `meta.eventStream` asked for `Accept: text/event-stream` may answer with Server-Sent Events
 *   (server/lib/event-stream.ts): the procedure runs exactly as for JSON, so errors come in the JSON envelope, and
 *   the stream starts only once it has succeeded.
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
  /** `meta.eventStream`: may answer `Accept: text/event-stream`. */
  eventStream: boolean;
}

type ZodLike = { _zod?: { def?: ZodDef } };
interface ZodDef {
  type?: string;
  innerType?: ZodLike;
  in?: ZodLike;
  shape?: Record<string, ZodLike>;
  catchall?: ZodLike;
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

/** The procedure's input schema, unwrapped; undefined when it takes none. */
function inputOf(proc: AnyTRPCProcedure): ZodDef | undefined {
  const inputs = (proc._def as { inputs?: unknown[] }).inputs ?? [];
  return inputs.length > 0 ? unwrap(inputs[inputs.length - 1]) : undefined;
}

/** Whether `/v1` hands the procedure an input (false for void-like input schemas); the OpenAPI document's 400s. */
export function procedureTakesInput(proc: AnyTRPCProcedure): boolean {
  const input = inputOf(proc);
  return input !== undefined && !VOID_LIKE.has(input.type ?? '');
}

/**
 * Whether the procedure's input is a strict object (`z.strictObject`): a field it does not declare is refused with
 * 400 "Unknown field". The OpenAPI document says so of its request body (`additionalProperties: false`).
 */
export function procedureInputIsStrict(proc: AnyTRPCProcedure): boolean {
  const input = inputOf(proc);
  return input?.type === 'object' && defOf(input.catchall)?.type === 'never';
}

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
    const input = inputOf(proc);
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
      takesInput: procedureTakesInput(proc),
      source:
        method === 'POST' ||
        method === 'PUT' ||
        method === 'PATCH' ||
        (method === 'DELETE' && meta.deleteWithBody)
          ? 'body'
          : 'query',
      arrayFields,
      successStatus: meta.successStatus ?? 200,
      location: meta.location,
      eventStream: meta.eventStream === true,
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

/** Neither a body nor a media type: a bodiless request (`DELETE /organization` sent without its fields). */
function isBodiless(req: FastifyRequest): boolean {
  const length = req.headers['content-length'];
  return (
    req.body === undefined &&
    req.headers['content-type'] === undefined &&
    req.headers['transfer-encoding'] === undefined &&
    (length === undefined || length === '0')
  );
}

function bodyInput(req: FastifyRequest, params: readonly string[]): Record<string, unknown> {
  // A request without a body reads as `{}`, whatever its method, so that missing required fields are named (400),
  // as for a bodiless POST (given `{}` as JSON already by the server's hook).
  if (isBodiless(req)) return {};
  // Fastify also parses text/plain; the API speaks JSON only.
  if (!req.headers['content-type']?.startsWith('application/json')) throw unsupportedMediaType();
  const body = req.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw validation('', 'Expected a JSON object');
  }
  const clash = params.filter((p) => Object.hasOwn(body, p));
  if (clash.length > 0) {
    throw invalidInput(clash.map((p) => ({ path: p, message: 'Unknown field (it is part of the path)' })));
  }
  return body as Record<string, unknown>;
}

function singleHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
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
  /** Milliseconds between heartbeat comments of event streams (default 15 s; tests use less). */
  eventStreamHeartbeatMs?: number;
  /**
   * Whether the caller of an open event stream may still act (token, session, API key, user status): asked every
   * `eventStreamRecheckMs`; the stream ends at the first `false`. Without it, streams are not re-checked.
   */
  stillAuthorized?: (ctx: Context) => Promise<boolean>;
  /** Milliseconds between those checks (EVENT_STREAM_RECHECK_INTERVAL, default 5 s). */
  eventStreamRecheckMs?: number;
  /** Sends an error in the envelope (and logs it when unexpected); `ctx` is undefined if it could not be made. */
  sendError(req: FastifyRequest, reply: FastifyReply, err: unknown, ctx: Context | undefined): FastifyReply;
}

/** Default interval between checks of an open stream's caller (see RestOptions.stillAuthorized). */
const EVENT_STREAM_RECHECK_MS = 5_000;

/** A buffer of this many unsent bytes means the client stopped reading: its stream is ended. */
const MAX_UNSENT_STREAM_BYTES = 1024 * 1024;

/**
 * The open event streams of the server: one heartbeat timer for all of them, and every one ended when the server
 * closes (Fastify's close waits for responses in progress, which a stream never finishes on its own).
 */
class EventStreams {
  private readonly open = new Set<() => void>();
  private readonly writers = new Set<(chunk: string) => void>();
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(
    app: FastifyInstance,
    private readonly heartbeatMs: number,
  ) {
    app.addHook('preClose', async () => {
      for (const end of [...this.open]) end();
    });
  }

  /** Commits the response to SSE and hands the stream to the procedure's `open`. */
  start(
    req: FastifyRequest,
    reply: FastifyReply,
    headers: Record<string, string>,
    open: NonNullable<EventStreamRequest['open']>,
    access?: { stillAuthorized: () => Promise<boolean>; everyMs: number },
  ): void {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      ...(reply.getHeaders() as Record<string, string>),
      ...headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      // Proxies that buffer responses (nginx) pass this one through as it comes.
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    req.raw.socket?.setNoDelay(true);

    let closed = false;
    let release: (() => void) | undefined;
    let recheck: NodeJS.Timeout | undefined;
    const write = (chunk: string) => {
      if (closed) return;
      res.write(chunk);
      if (res.writableLength > MAX_UNSENT_STREAM_BYTES) end();
    };
    const end = () => {
      if (closed) return;
      closed = true;
      clearInterval(recheck);
      this.open.delete(end);
      this.writers.delete(write);
      if (this.open.size === 0 && this.heartbeat) {
        clearInterval(this.heartbeat);
        this.heartbeat = undefined;
      }
      try {
        release?.();
      } finally {
        if (!res.writableEnded) res.end();
      }
    };
    const sink: EventSink = {
      send: (event) => write(formatStreamEvent(event)),
      close: end,
      get closed() {
        return closed;
      },
    };
    this.open.add(end);
    this.writers.add(write);
    // A comment line every so often keeps proxies and clients from timing the connection out.
    this.heartbeat ??= setInterval(() => {
      for (const w of this.writers) w(': keep-alive\n\n');
    }, this.heartbeatMs).unref();
    res.on('close', end);
    // Access is checked again every few seconds, not only when the stream opened: a user suspended or deleted, a
    // session logged out or revoked, an API key revoked or an access token expired ends the stream within that
    // interval (docs/security.md). A timer rather than a subscription to revocations: every way access ends (some
    // in other processes, or just the clock) is one query the request path already makes, without a channel of
    // its own for each.
    if (access) {
      let checking = false;
      recheck = setInterval(() => {
        if (checking || closed) return;
        checking = true;
        access
          .stillAuthorized()
          .then(
            (ok) => {
              if (ok || closed) return;
              sink.send({
                event: 'error',
                data: {
                  code: 'UNAUTHORIZED',
                  message:
                    'Access ended: the token, key or user is no longer valid; log in again with POST /v1/auth/login',
                },
              });
              end();
            },
            (err: unknown) =>
              req.log.warn({ err }, 'could not check an event stream caller; the stream stays open'),
          )
          .finally(() => {
            checking = false;
          });
      }, access.everyMs);
      recheck.unref();
    }
    try {
      release = open(sink);
    } catch (err) {
      req.log.error({ err }, 'event stream failed to start');
      end();
    }
    // The stream may have ended while `open` ran: release what it set up.
    if (closed) release?.();
  }
}

/** Registers one Fastify route per `/v1` operation. */
export function registerRestRoutes(app: FastifyInstance, opts: RestOptions): RestRoute[] {
  const routes = restRoutes(opts.router);
  const streams = new EventStreams(app, opts.eventStreamHeartbeatMs ?? EVENT_STREAM_HEARTBEAT_MS);
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
          const stream = route.eventStream && acceptsEventStream(req.headers.accept);
          if (stream) ctx.eventStream = { lastEventId: singleHeader(req.headers['last-event-id']) };
          const data: unknown = await callTRPCProcedure({
            router: opts.router,
            path: route.procedurePath,
            type: route.type,
            ctx,
            getRawInput: async () => input,
            signal: undefined,
            batchIndex: 0,
          });
          const open = ctx.eventStream?.open;
          if (stream && open) {
            const streamCtx = ctx;
            const { stillAuthorized } = opts;
            return streams.start(
              req,
              reply,
              ctx.response.headers,
              open,
              stillAuthorized && ctx.bearer !== undefined
                ? {
                    stillAuthorized: () => stillAuthorized(streamCtx),
                    everyMs: opts.eventStreamRecheckMs ?? EVENT_STREAM_RECHECK_MS,
                  }
                : undefined,
            );
          }
          if (route.location) {
            ctx.response.headers.Location = opts.locationBase + resolveLocation(route.location, data);
          }
          // A reply is thenable, but settles only once the response has gone out: it is returned (Fastify's sign
          // that the handler sent it), not awaited, and nothing it could reject with is for the catch below.
          // eslint-disable-next-line @typescript-eslint/return-await
          return reply.status(route.successStatus).headers(ctx.response.headers).send(data);
        } catch (err) {
          // A kept error answer replayed for the same Idempotency-Key: sent as it was first sent.
          if (ctx?.replayedError) {
            return reply
              .status(ctx.replayedError.status)
              .headers(ctx.response.headers)
              .send(ctx.replayedError.body);
          }
          return opts.sendError(req, reply, err, ctx);
        }
      },
    });
  }
  return routes;
}
