import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { isUtf8 } from 'node:buffer';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import Fastify, {
  LogController,
  type ConnectionError,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { TRPCError } from '@trpc/server';
import type { FastifyApiReferenceOptions } from '@scalar/fastify-api-reference';
import {
  AppError,
  headersTooLarge,
  invalidJson,
  malformedRequest,
  malformedUrl,
  requestTimeout,
  shuttingDown,
  unreadableBody,
  unsupportedMediaType,
  uriTooLong,
  type ErrorCode,
} from './lib/errors.js';
import { newId } from './lib/ids.js';
import { registerCors } from './cors.js';
import { findDocsDir, listGuides } from './guides.js';
import { buildOpenApiDocument } from './openapi.js';
import { registerRestRoutes } from './rest.js';
import { appRouter } from './router.js';
import type { AppDeps } from './kit/deps.js';
import { createHttpContext } from './trpc/context.js';
import { bearerStillValid } from './trpc/procedures.js';
import { registerTrpcRoutes } from './trpc/http.js';
import { toAppError } from './trpc/init.js';

export const BODY_LIMIT_BYTES = 1024 * 1024;
/**
 * A request (headers and body) must arrive whole within this time; a client trickling bytes is answered 408 and
 * disconnected. Node checks its connections for it every CONNECTION_CHECK_MS (30 s by default, which let a request
 * run to 90 s).
 */
export const REQUEST_TIMEOUT_MS = 60_000;
const CONNECTION_CHECK_MS = 1_000;
/** Path parameters are ids; a longer one is answered 404 by its procedure, one over this 414 by the router. */
export const MAX_PATH_PARAM_LENGTH = 2048;
const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;
/** The id given to a request, kept on Node's request too: errors of its connection (408) are answered with it. */
const kRequestId = Symbol('requestId');
/** A connection whose client error was answered: the parser reports an error again for every later chunk. */
const kAnswered = Symbol('clientErrorAnswered');
/** The parser's errors found in a body's framing, once the request line and headers were read. */
const BODY_FRAMING_ERRORS = new Set([
  'HPE_INVALID_CHUNK_SIZE',
  'HPE_CHUNK_EXTENSIONS_OVERFLOW',
  'HPE_INVALID_CONTENT_LENGTH',
  'HPE_UNEXPECTED_CONTENT_LENGTH',
  'HPE_INVALID_TRANSFER_ENCODING',
  'HPE_INVALID_EOF_STATE',
  'HPE_CR_EXPECTED',
  'HPE_LF_EXPECTED',
  'HPE_STRICT',
]);

interface ErrorEnvelope {
  success: false;
  error: { code: ErrorCode; message: string; details?: unknown[]; request_id: string };
}

function envelope(requestId: string, err: AppError): ErrorEnvelope {
  const { code, message, details } = err;
  return { success: false, error: { code, message, ...(details ? { details } : {}), request_id: requestId } };
}

/** Headers of every answer, errors included (also set where no onRequest hook ran). */
function setCommonHeaders(req: FastifyRequest, reply: FastifyReply) {
  void reply.header('X-Request-Id', req.id);
  void reply.header('X-Content-Type-Options', 'nosniff');
  // API answers are per caller (and carry tokens on /auth/*): never stored by a cache (RFC 6749 §5.1).
  if ((req.url.startsWith('/v1/') || req.url.startsWith('/trpc/')) && !req.url.startsWith('/v1/openapi.json'))
    void reply.header('Cache-Control', 'no-store');
}

function sendError(req: FastifyRequest, reply: FastifyReply, err: AppError) {
  if (err.retryAfter !== undefined) void reply.header('Retry-After', String(err.retryAfter));
  if (err.status === 401) void reply.header('WWW-Authenticate', 'Bearer');
  return reply.status(err.status).send(envelope(req.id, err));
}

/** Maps Fastify's own request errors (parsing, limits, content type) to the error envelope (docs/api-conventions.md "Errors"). */
function fastifyErrorToAppError(err: FastifyError): AppError {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('PAYLOAD_TOO_LARGE', `Request body exceeds ${BODY_LIMIT_BYTES} bytes`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return unsupportedMediaType();
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return unreadableBody();
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return invalidJson();
    case 'FST_ERR_BAD_URL':
      return malformedUrl();
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return uriTooLong(MAX_PATH_PARAM_LENGTH);
  }
  if (err instanceof SyntaxError || err.statusCode === 400) return invalidJson();
  if (err.statusCode === 413)
    return new AppError('PAYLOAD_TOO_LARGE', `Request body exceeds ${BODY_LIMIT_BYTES} bytes`);
  if (err.statusCode === 415) return unsupportedMediaType();
  return new AppError('INTERNAL_ERROR', 'Internal server error', { cause: err });
}

/** Whether the request carries a body (a length above zero, or chunked). */
function hasBody(req: FastifyRequest): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** The `charset` parameter of a (lowercased) media type, without quotes; undefined when absent. */
function charsetOf(contentType: string): string | undefined {
  for (const param of contentType.split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq > 0 && param.slice(0, eq).trim() === 'charset')
      return param
        .slice(eq + 1)
        .trim()
        .replace(/^"|"$/g, '');
  }
  return undefined;
}

/**
 * Bodies are JSON in UTF-8, sent as they are: a `charset` other than UTF-8 or any `Content-Encoding` but
 * `identity` is refused (415) rather than read as something it is not.
 */
function checkBodyEncoding(req: FastifyRequest): void {
  const ct = req.headers['content-type'];
  if (ct !== undefined && ct.includes('charset')) {
    const charset = charsetOf(ct);
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      throw unsupportedMediaType('Request bodies must be JSON encoded as UTF-8 (charset=utf-8)');
    }
  }
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    throw unsupportedMediaType('Request bodies must not be compressed (no Content-Encoding but identity)');
  }
}

type TaggedRequest = IncomingMessage & { [kRequestId]?: string };
type HttpSocket = Socket & {
  [kAnswered]?: true;
  /** Node's HTTP parser of the connection; `incoming` is the request whose headers it has read. */
  parser?: { incoming?: TaggedRequest | null } | null;
  /** The response being written on the connection. */
  _httpMessage?: ServerResponse | null;
};

/**
 * Answers what Node's HTTP server refuses before Fastify sees a request, or while it reads one: parser errors (bad
 * request line or headers, headers over the limit, broken chunked framing) and the request timeout. The answer is
 * written on the socket (there is no response object to use) in the error envelope, with the request's id when
 * Fastify already gave it one, and the connection is closed.
 */
function answerClientError(
  this: FastifyInstance,
  err: ConnectionError,
  rawSocket: Socket,
  timeoutMs: number,
): void {
  const socket = rawSocket as HttpSocket;
  if (err.code === 'ECONNRESET' || socket.destroyed || socket[kAnswered]) return;
  socket[kAnswered] = true;
  this.log.debug({ err }, 'client error');
  const response = socket._httpMessage;
  const incoming: TaggedRequest | undefined = socket.parser?.incoming ?? response?.req;
  // Nothing can be answered once an answer has begun, or when the request being read was answered already (a 415
  // sent before its body arrived): the connection is only closed.
  if (!socket.writable || response?.headersSent || (incoming && !response)) {
    socket.destroy();
    return;
  }
  const appErr =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? requestTimeout(timeoutMs)
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? headersTooLarge(maxHeaderSize)
        : incoming && BODY_FRAMING_ERRORS.has(err.code)
          ? unreadableBody()
          : err.code === 'HPE_INVALID_URL'
            ? malformedUrl()
            : malformedRequest();
  const id = incoming?.[kRequestId] ?? newId('req');
  const body = JSON.stringify(envelope(id, appErr));
  const head = [
    `HTTP/1.1 ${appErr.status} ${STATUS_CODES[appErr.status]}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-Id: ${id}`,
    'X-Content-Type-Options: nosniff',
    'Cache-Control: no-store',
    'Connection: close',
  ];
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    // The parser still works: the rest of a late request must not reach a route after it was answered.
    socket.write(`${head.join('\r\n')}\r\n\r\n${body}`);
    socket.destroy();
    return;
  }
  // The parser stopped at the error. The client may still be sending (a header block over the limit): closing at
  // once with unread data would reset the connection, losing the answer; it gets a moment to read it first.
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
  setTimeout(() => socket.destroy(), 1_000).unref();
}

/** A response as it leaves the server, for an observer (tests hold every `/v1` answer to the OpenAPI document). */
export interface ObservedResponse {
  method: string;
  /** The route's path as registered (`/v1/users/:id`); undefined when no route matched. */
  route: string | undefined;
  url: string;
  status: number;
  /** Lowercased names. */
  headers: Record<string, string | number | string[] | undefined>;
  /** The body when it was sent as text (JSON); undefined for streams and buffers. */
  body: string | undefined;
}
export type ResponseObserver = (res: ObservedResponse) => void;

export interface BuildOptions {
  /** REQUEST_TIMEOUT_MS unless set (tests use a short one). */
  requestTimeoutMs?: number;
  /**
   * Called with every response Fastify sends (not the raw-socket answers to unparseable requests, nor event
   * streams). Tests install one; without it no hook is added, so serving pays nothing for it.
   */
  observeResponse?: ResponseObserver;
}

/**
 * What a request log line (debug and trace levels) says of the request: Fastify's fields, with the query string
 * replaced by `?[redacted]`. Capability tokens travel there (`hosted_invoice_url`, `pdf_url`: `?token=`), and no
 * other query parameter is worth a log line (docs/security.md).
 */
export function requestLogFields(req: FastifyRequest): Record<string, unknown> {
  const q = req.url.indexOf('?');
  return {
    method: req.method,
    url: q === -1 ? req.url : `${req.url.slice(0, q)}?[redacted]`,
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

/**
 * Builds the HTTP server: `/v1` (REST), `/trpc`, `/v1/openapi.json`, `/docs`, `/healthz`, `/readyz`. Each step
 * below adds its hooks, handlers or routes; Fastify runs hooks in the order they were added, so the order of the
 * steps is the order a request meets them.
 */
export async function buildApp(deps: AppDeps, opts: BuildOptions = {}): Promise<FastifyInstance> {
  const requestTimeoutMs = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const lifecycle: Lifecycle = { draining: false };
  const app = createFastify(deps, requestTimeoutMs);
  registerDraining(app, lifecycle);
  if (opts.observeResponse) registerResponseObserver(app, opts.observeResponse);
  // The headers of every answer first, then CORS (which answers preflights at once), then the checks that refuse.
  registerCommonHeaders(app);
  await registerCors(app, deps.config);
  registerRequestChecks(app, lifecycle);
  registerJsonBodies(app);
  registerFormBodies(app);
  registerErrorHandlers(app);
  registerHealthRoutes(app, deps);
  registerOpenApiDocument(app, deps.config);
  registerDocs(app);
  registerModuleHttpRoutes(app, deps);
  await registerTrpc(app, deps);
  registerRest(app, deps);
  return app;
}

/** Set when the server starts draining (SIGTERM): requests still arriving on open connections are answered 503. */
interface Lifecycle {
  draining: boolean;
}

/**
 * The Fastify instance with its server options: Node's own timers, the request id, the router's limits, and
 * Fastify's and Node's own refusals answered in the error envelope.
 */
function createFastify(deps: AppDeps, requestTimeoutMs: number): FastifyInstance {
  const { config } = deps;
  // Node's own timers: the whole request and its headers within the timeout, checked often enough to hold it.
  const nodeServerOptions = {
    requestTimeout: requestTimeoutMs,
    headersTimeout: requestTimeoutMs,
    connectionsCheckingInterval: Math.min(
      CONNECTION_CHECK_MS,
      Math.max(10, Math.floor(requestTimeoutMs / 4)),
    ),
  };
  // Typed as Fastify's logger interface, not pino's, so that the instance is a plain FastifyInstance. Its `req`
  // serializer takes precedence over Fastify's (a child's serializers win).
  const loggerInstance: FastifyBaseLogger = deps.log.child({}, { serializers: { req: requestLogFields } });
  return Fastify({
    loggerInstance,
    // Per-request log lines only at debug/trace; errors are logged where they are converted.
    logController: new LogController({
      disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace',
    }),
    bodyLimit: BODY_LIMIT_BYTES,
    requestTimeout: requestTimeoutMs,
    ...(config.tls
      ? { https: { cert: config.tls.cert, key: config.tls.key, ...nodeServerOptions } }
      : { http: nodeServerOptions }),
    trustProxy: config.trustProxy,
    genReqId: (req) => {
      const incoming = req.headers['x-request-id'];
      const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : newId('req');
      (req as TaggedRequest)[kRequestId] = id;
      return id;
    },
    requestIdHeader: false,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PATH_PARAM_LENGTH },
    // Answered in the error envelope rather than by Fastify or Node in their own shapes.
    return503OnClosing: false,
    frameworkErrors: (err, req, reply) => {
      setCommonHeaders(req, reply);
      void sendError(req, reply, fastifyErrorToAppError(err));
    },
    clientErrorHandler(err, socket) {
      answerClientError.call(this as unknown as FastifyInstance, err, socket, requestTimeoutMs);
    },
  });
}

/** Marks the server draining as it starts to close (registerRequestChecks answers 503 from then on). */
function registerDraining(app: FastifyInstance, lifecycle: Lifecycle): void {
  app.addHook('preClose', async () => {
    lifecycle.draining = true;
  });
}

/** Hands every response Fastify sends to `observe` (BuildOptions.observeResponse). */
function registerResponseObserver(app: FastifyInstance, observe: ResponseObserver): void {
  app.addHook('onSend', async (req, reply, payload) => {
    observe({
      method: req.method,
      route: req.routeOptions.url,
      url: req.url,
      status: reply.statusCode,
      headers: reply.getHeaders(),
      body: typeof payload === 'string' ? payload : undefined,
    });
    return payload;
  });
}

/** The headers of every answer (setCommonHeaders), before anything can answer. */
function registerCommonHeaders(app: FastifyInstance): void {
  app.addHook('onRequest', (req, reply, done) => {
    setCommonHeaders(req, reply);
    done();
  });
}

/** Refusals before any route: a draining server (503), a body's charset or encoding (415). */
function registerRequestChecks(app: FastifyInstance, lifecycle: Lifecycle): void {
  app.addHook('onRequest', async (req) => {
    if (lifecycle.draining) throw shuttingDown();
    // Media types are case-insensitive; the REST routes and the /trpc adapter compare them as written.
    const ct = req.headers['content-type'];
    if (ct !== undefined) req.headers['content-type'] = ct.toLowerCase();
    if (hasBody(req)) checkBodyEncoding(req);
  });
}

/** The parser of JSON bodies: UTF-8 only, and an absent or empty body is an empty object. */
function jsonBodyParser(app: FastifyInstance) {
  // An absent or empty JSON body is an empty object (POST /auth/logout {} and a bare POST mean the same).
  const defaultJson = app.getDefaultJsonParser('error', 'error');
  return (req: FastifyRequest, body: Buffer, done: (err: Error | null, body?: unknown) => void) => {
    // Bytes that are not UTF-8 would be read as U+FFFD and stored changed: refused instead.
    if (!isUtf8(body)) return done(invalidJson('Request body is not valid UTF-8'), undefined);
    const text = body.toString('utf8');
    if (text.trim() === '') return done(null, {});
    return defaultJson(req, text, done);
  };
}

/** JSON bodies: UTF-8 only, and an absent or empty body is an empty object. */
function registerJsonBodies(app: FastifyInstance): void {
  const parseJson = jsonBodyParser(app);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) =>
    parseJson(req, body as Buffer, done),
  );
  // Body-carrying methods sent with no body and no Content-Type are treated as `{}` rather than refused.
  app.addHook('preValidation', async (req) => {
    if (
      (req.method === 'POST' || req.method === 'PUT' || req.method === 'PATCH') &&
      req.body === undefined &&
      !req.headers['content-type'] &&
      !req.headers['transfer-encoding'] &&
      (req.headers['content-length'] === undefined || req.headers['content-length'] === '0')
    ) {
      req.headers['content-type'] = 'application/json';
      req.body = {};
    }
  });
}

/**
 * `application/x-www-form-urlencoded` bodies, for the routes that take an HTML form's POST (a module route with
 * `form: true`: the SAML ACS), up to the usual body limit: an object of strings, the first value of a repeated name.
 * Every other route refuses them (415), as before any form was read.
 */
function registerFormBodies(app: FastifyInstance): void {
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'buffer', bodyLimit: BODY_LIMIT_BYTES },
    (req, body, done) => {
      const config = req.routeOptions.config as { formBody?: boolean } | undefined;
      if (config?.formBody !== true) return done(unsupportedMediaType(), undefined);
      const bytes = body as Buffer;
      if (!isUtf8(bytes)) return done(invalidJson('Request body is not valid UTF-8'), undefined);
      const fields: Record<string, string> = Object.create(null) as Record<string, string>;
      for (const [name, value] of new URLSearchParams(bytes.toString('utf8'))) {
        if (!Object.hasOwn(fields, name)) fields[name] = value;
      }
      return done(null, { ...fields });
    },
  );
}

/** Every error, and every unknown route, answered in the error envelope (docs/api-conventions.md "Errors"). */
function registerErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, req, reply) => {
    const appErr = err instanceof AppError ? err : fastifyErrorToAppError(err);
    if (appErr.code === 'INTERNAL_ERROR') req.log.error({ err }, 'unhandled error');
    return sendError(req, reply, appErr);
  });
  app.setNotFoundHandler((req, reply) =>
    sendError(req, reply, new AppError('NOT_FOUND', `No route for ${req.method} ${req.url.split('?')[0]}`)),
  );
}

/** `/healthz` (the process answers) and `/readyz` (its database, and Redis when configured). */
function registerHealthRoutes(app: FastifyInstance, deps: AppDeps): void {
  app.get('/healthz', async () => ({ success: true, status: 'ok' }));
  // Ready when the database answers and is migrated. With REDIS_URL, Redis is checked too, but a Redis that cannot
  // be reached only degrades the process (its limits fall back to its own): still 200, with a detail saying so
  // (docs/deploying.md, "Readiness and draining").
  app.get('/readyz', async (_req, reply) => {
    const shared = deps.apiUsage.shared;
    const redis = shared?.check();
    try {
      await deps.db.orm.em.getConnection().execute('select 1');
      const pending = await deps.db.orm.migrator.getPending();
      if (pending.length > 0) throw new Error('migrations pending');
    } catch {
      await redis;
      return sendError(
        _req,
        reply,
        new AppError('SERVICE_UNAVAILABLE', 'Database is unreachable or not migrated'),
      );
    }
    if (!redis) return { success: true, status: 'ready', database: deps.db.kind };
    if ((await redis) === 'connected') {
      return { success: true, status: 'ready', database: deps.db.kind, redis: 'connected' };
    }
    return {
      success: true,
      status: 'degraded',
      database: deps.db.kind,
      redis: 'unreachable',
      detail:
        'Redis is unreachable: burst limits and monthly quotas are counted by this process alone until it is back',
    };
  });
}

/** `/v1/openapi.json`, the document of the REST API. */
function registerOpenApiDocument(app: FastifyInstance, config: AppDeps['config']): void {
  // Built once: the router does not change while the process runs.
  const openApiDocument = JSON.stringify(buildOpenApiDocument({ publicBaseUrl: config.publicBaseUrl }));
  app.get('/v1/openapi.json', async (_req, reply) =>
    reply.type('application/json; charset=utf-8').send(openApiDocument),
  );
}

/** `/docs`, the API reference page. */
function registerDocs(app: FastifyInstance): void {
  // The reference page and its script are served from node_modules; nothing is fetched from a CDN (no web fonts,
  // telemetry, AI agent or hosted tooling), so it works on a machine without internet access. The UI package embeds
  // a 4 MB script (about 40 MB of memory once loaded): it is loaded on the first visit to /docs, into a small inner
  // Fastify instance that answers the /docs routes, rather than at start by every process.
  const scalarOptions: FastifyApiReferenceOptions = {
    routePrefix: '/docs',
    hooks: {
      // The page's 4 MB script only changes with the package: let browsers keep it for an hour.
      onRequest: (req, reply, done) => {
        if (req.url.startsWith('/docs/js/')) void reply.header('Cache-Control', 'public, max-age=3600');
        done();
      },
    },
    configuration: {
      url: '/v1/openapi.json',
      pageTitle: 'Cloud Platform API reference',
      withDefaultFonts: false,
      telemetry: false,
      showDeveloperTools: 'never',
      hideClientButton: true,
      agent: { disabled: true },
      mcp: { disabled: true },
      documentDownloadType: 'json',
      defaultOpenAllTags: true,
    },
  };
  let docs: Promise<FastifyInstance> | undefined;
  const loadDocs = () =>
    (docs ??= (async () => {
      const { default: scalar } = await import('@scalar/fastify-api-reference');
      const inner = Fastify({ logger: false, routerOptions: { ignoreTrailingSlash: true } });
      await inner.register(scalar, scalarOptions);
      await inner.ready();
      return inner;
    })());
  const serveDocs = async (req: FastifyRequest, reply: FastifyReply) => {
    const inner = await loadDocs();
    const res = await inner.inject({ method: req.method as 'GET', url: req.url, headers: req.headers });
    for (const [name, value] of Object.entries(res.headers)) {
      if (
        value !== undefined &&
        !['content-length', 'connection', 'transfer-encoding', 'keep-alive'].includes(name)
      )
        void reply.header(name, value);
    }
    return reply.status(res.statusCode).send(res.rawPayload);
  };
  // The guides the reference page links to (docs/*.md, README "Guides"), as Markdown: their links to one another
  // are relative, so they resolve under /docs/guides/ too.
  const guidesDir = findDocsDir();
  const guideFiles = new Set(listGuides(guidesDir).map((g) => g.file));
  app.route({
    method: ['GET', 'HEAD'],
    url: '/docs/guides/:file',
    handler: async (req, reply) => {
      const { file } = req.params as { file: string };
      if (!guidesDir || !guideFiles.has(file)) throw new AppError('NOT_FOUND', 'No such guide');
      const text = await readFile(join(guidesDir, file), 'utf8');
      return reply
        .type('text/markdown; charset=utf-8')
        .header('X-Content-Type-Options', 'nosniff')
        .send(text);
    },
  });
  app.route({ method: ['GET', 'HEAD'], url: '/docs', handler: serveDocs });
  app.route({ method: ['GET', 'HEAD'], url: '/docs/*', handler: serveDocs });
}

/**
 * Modules' own HTTP routes (manifest `httpRoutes`): under `/v1` (an invoice's page and PDF, opened through a signed
 * link) or a prefix of their own (SCIM's `/scim/v2`), each answering its errors in the envelope or its own body.
 */
function registerModuleHttpRoutes(app: FastifyInstance, deps: AppDeps): void {
  const routes = deps.registry.modules.flatMap((m) => m.httpRoutes ?? []);
  // Further JSON media types (`application/scim+json`), read only by the routes that list them.
  const parseJson = jsonBodyParser(app);
  for (const type of new Set(routes.flatMap((r) => r.jsonMediaTypes ?? []))) {
    app.addContentTypeParser(type, { parseAs: 'buffer' }, (req, body, done) => {
      const config = req.routeOptions.config as { jsonMediaTypes?: readonly string[] } | undefined;
      if (!config?.jsonMediaTypes?.includes(type)) return done(unsupportedMediaType(), undefined);
      return parseJson(req, body as Buffer, done);
    });
  }
  for (const route of routes) {
    const answerError = (req: FastifyRequest, reply: FastifyReply, appErr: AppError) => {
      if (appErr.code === 'INTERNAL_ERROR') req.log.error({ err: appErr.cause ?? appErr }, 'unhandled error');
      if (!route.errorAnswer) return sendError(req, reply, appErr);
      const out = route.errorAnswer(appErr, req.id);
      return reply
        .code(out.status ?? appErr.status)
        .type(out.contentType)
        .headers(out.headers ?? {})
        .send(out.body);
    };
    app.route({
      method: route.method,
      url: `${route.prefix ?? '/v1'}${route.path}`,
      // Read by the body parsers (registerFormBodies, above): only such a route takes an HTML form's body, or JSON
      // under another media type.
      config: { formBody: route.form === true, jsonMediaTypes: route.jsonMediaTypes ?? [] },
      // The request's own errors (its body's media type or JSON) are the route's to answer too.
      errorHandler: (err: FastifyError, req, reply) => {
        void answerError(req, reply, err instanceof AppError ? err : fastifyErrorToAppError(err));
      },
      handler: async (req, reply) => {
        try {
          const gone = new AbortController();
          // The response closing before it was written means the client went away.
          reply.raw.once('close', () => gone.abort());
          const out = await route.handler(deps, {
            params: req.params as Record<string, string>,
            query: req.query as Record<string, string | undefined>,
            authorization: req.headers.authorization,
            body: req.body,
            signal: gone.signal,
            requestId: req.id,
            ip: req.ip,
            userAgent: req.headers['user-agent'],
          });
          // A reply is thenable but settles only once sent: returned, not awaited (as in server/rest.ts).
          // eslint-disable-next-line @typescript-eslint/return-await
          return reply
            .code(out.status ?? 200)
            .type(out.contentType)
            .headers(out.headers ?? {})
            .send(out.body);
        } catch (err) {
          return answerError(req, reply, toAppError(err));
        }
      },
    });
  }
}

/** `/trpc`, the tRPC protocol of the client SDK. */
async function registerTrpc(app: FastifyInstance, deps: AppDeps): Promise<void> {
  // `/trpc`: the tRPC protocol of the client SDK, served by server/trpc/http.ts (no Fetch `Request` per call).
  await registerTrpcRoutes(app, {
    prefix: '/trpc',
    router: appRouter,
    createContext: ({ req }) => createHttpContext(deps, req),
    onError({ error, path }) {
      if (!(error.cause instanceof AppError) || error.cause.code === 'INTERNAL_ERROR') {
        deps.log.debug({ err: error, path }, 'trpc error');
      }
    },
    responseMeta({ ctx }) {
      return { headers: ctx?.response.headers ?? {} };
    },
  });
}

/** `/v1`, the REST API: a route for every procedure with `meta.openapi`. */
function registerRest(app: FastifyInstance, deps: AppDeps): void {
  const { config } = deps;
  // REST: `/v1/<path>` for every procedure with `meta.openapi` (see server/rest.ts).
  registerRestRoutes(app, {
    router: appRouter,
    basePath: '/v1',
    locationBase: `${config.publicBaseUrl}/v1`,
    createContext: (req) => createHttpContext(deps, req),
    stillAuthorized: bearerStillValid,
    eventStreamRecheckMs: config.eventStreamRecheckMs,
    sendError(req, reply, err, ctx) {
      const appErr = toAppError(err);
      // Errors of procedures were logged by their middleware; anything else unexpected is logged here.
      if (appErr.code === 'INTERNAL_ERROR' && !(err instanceof TRPCError)) {
        req.log.error({ err }, 'unhandled error');
      }
      if (ctx) void reply.headers(ctx.response.headers);
      return sendError(req, reply, appErr);
    },
  });
}
