import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { fastifyTRPCPlugin } from '@trpc/server/adapters/fastify';
import { TRPCError } from '@trpc/server';
import type { FastifyApiReferenceOptions } from '@scalar/fastify-api-reference';
import { AppError, ERROR_STATUS, invalidJson, unsupportedMediaType, type ErrorCode } from './lib/errors.js';
import { newId } from './lib/ids.js';
import { buildOpenApiDocument } from './openapi.js';
import { registerRestRoutes } from './rest.js';
import { appRouter } from './router.js';
import type { AppDeps } from './kit/deps.js';
import { createHttpContext, type Context } from './trpc/context.js';
import { toAppError } from './trpc/init.js';

export const BODY_LIMIT_BYTES = 1024 * 1024;
/** A request (headers and body) must arrive within this time; a client trickling bytes is cut off (408). */
export const REQUEST_TIMEOUT_MS = 60_000;
const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

interface ErrorEnvelope {
  success: false;
  error: { code: ErrorCode; message: string; details?: unknown[]; request_id: string };
}

function envelope(req: FastifyRequest, code: ErrorCode, message: string, details?: unknown[]): ErrorEnvelope {
  return { success: false, error: { code, message, ...(details ? { details } : {}), request_id: req.id } };
}

function sendError(req: FastifyRequest, reply: FastifyReply, err: AppError) {
  if (err.retryAfter !== undefined) void reply.header('Retry-After', String(err.retryAfter));
  if (ERROR_STATUS[err.code] === 401) void reply.header('WWW-Authenticate', 'Bearer');
  return reply.status(ERROR_STATUS[err.code]).send(envelope(req, err.code, err.message, err.details));
}

/** Maps Fastify's own request errors (parsing, limits, content type) to the envelope of conventions §3. */
function fastifyErrorToAppError(err: FastifyError): AppError {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('PAYLOAD_TOO_LARGE', `Request body exceeds ${BODY_LIMIT_BYTES} bytes`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return unsupportedMediaType();
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return invalidJson();
  }
  if (err instanceof SyntaxError || err.statusCode === 400) return invalidJson();
  if (err.statusCode === 413)
    return new AppError('PAYLOAD_TOO_LARGE', `Request body exceeds ${BODY_LIMIT_BYTES} bytes`);
  if (err.statusCode === 415) return unsupportedMediaType();
  return new AppError('INTERNAL_ERROR', 'Internal server error', { cause: err });
}

/** Builds the HTTP server: `/v1` (REST), `/trpc`, `/v1/openapi.json`, `/docs`, `/healthz`, `/readyz`. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    // Per-request log lines only at debug/trace; errors are logged where they are converted.
    logController: new LogController({
      disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace',
    }),
    bodyLimit: BODY_LIMIT_BYTES,
    requestTimeout: REQUEST_TIMEOUT_MS,
    trustProxy: config.trustProxy,
    genReqId: (req) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : newId('req');
    },
    requestIdHeader: false,
    // Path parameters are ids; a longer one is answered 404 by its procedure rather than 414 by the router.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 2048 },
    ...(config.tls ? { https: { cert: config.tls.cert, key: config.tls.key } } : {}),
  });

  app.addHook('onRequest', async (req, reply) => {
    void reply.header('X-Request-Id', req.id);
    void reply.header('X-Content-Type-Options', 'nosniff');
    // API answers are per caller (and carry tokens on /auth/*): never stored by a cache (RFC 6749 §5.1).
    if (
      (req.url.startsWith('/v1/') || req.url.startsWith('/trpc/')) &&
      !req.url.startsWith('/v1/openapi.json')
    )
      void reply.header('Cache-Control', 'no-store');
    // Media types are case-insensitive; the REST routes and the /trpc adapter compare them as written.
    const ct = req.headers['content-type'];
    if (ct !== undefined) req.headers['content-type'] = ct.toLowerCase();
  });

  // An absent or empty JSON body is an empty object (POST /auth/logout {} and a bare POST mean the same).
  const defaultJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (typeof body === 'string' && body.trim() === '') return done(null, {});
    return defaultJson(req, body as string, done);
  });
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

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const appErr = err instanceof AppError ? err : fastifyErrorToAppError(err);
    if (appErr.code === 'INTERNAL_ERROR') req.log.error({ err }, 'unhandled error');
    return sendError(req, reply, appErr);
  });
  app.setNotFoundHandler((req, reply) =>
    sendError(req, reply, new AppError('NOT_FOUND', `No route for ${req.method} ${req.url.split('?')[0]}`)),
  );

  app.get('/healthz', async () => ({ success: true, status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    try {
      await deps.db.orm.em.getConnection().execute('select 1');
      const pending = await deps.db.orm.migrator.getPending();
      if (pending.length > 0) throw new Error('migrations pending');
      return { success: true, status: 'ready', database: deps.db.kind };
    } catch {
      return sendError(
        _req,
        reply,
        new AppError('SERVICE_UNAVAILABLE', 'Database is unreachable or not migrated'),
      );
    }
  });

  // Built once: the router does not change while the process runs.
  const openApiDocument = JSON.stringify(buildOpenApiDocument({ publicBaseUrl: config.publicBaseUrl }));
  app.get('/v1/openapi.json', async (_req, reply) =>
    reply.type('application/json; charset=utf-8').send(openApiDocument),
  );
  // The reference page and its script are served from node_modules; nothing is fetched from a CDN (no web fonts,
  // telemetry, AI agent or hosted tooling), so it works on a machine without internet access. The UI package embeds
  // a 4 MB script (about 40 MB of memory once loaded): it is loaded on the first visit to /docs, into a small inner
  // Fastify instance that answers the /docs routes, rather than at start by every process.
  const scalarOptions: FastifyApiReferenceOptions = {
    routePrefix: '/docs',
    hooks: {
      // The page's 4 MB script only changes with the package: let browsers keep it for an hour.
      onRequest: async (req, reply) => {
        if (req.url.startsWith('/docs/js/')) void reply.header('Cache-Control', 'public, max-age=3600');
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
  app.route({ method: ['GET', 'HEAD'], url: '/docs', handler: serveDocs });
  app.route({ method: ['GET', 'HEAD'], url: '/docs/*', handler: serveDocs });

  // Modules' public non-JSON routes under /v1 (an invoice's page and PDF, opened through a signed link).
  for (const route of deps.registry.modules.flatMap((m) => m.httpRoutes ?? [])) {
    app.route({
      method: route.method,
      url: `/v1${route.path}`,
      handler: async (req, reply) => {
        try {
          const out = await route.handler(deps, {
            params: req.params as Record<string, string>,
            query: req.query as Record<string, string | undefined>,
          });
          return reply
            .type(out.contentType)
            .headers(out.headers ?? {})
            .send(out.body);
        } catch (err) {
          const appErr = toAppError(err);
          if (appErr.code === 'INTERNAL_ERROR') req.log.error({ err }, 'unhandled error');
          return sendError(req, reply, appErr);
        }
      },
    });
  }

  const createContext = ({ req }: { req: FastifyRequest }): Context => createHttpContext(deps, req);

  await app.register(fastifyTRPCPlugin, {
    prefix: '/trpc',
    trpcOptions: {
      router: appRouter,
      createContext,
      onError({ error, path }: { error: Error; path?: string }) {
        if (!(error.cause instanceof AppError) || error.cause.code === 'INTERNAL_ERROR') {
          deps.log.debug({ err: error, path }, 'trpc error');
        }
      },
      responseMeta({ ctx }: { ctx?: Context }) {
        return { headers: ctx?.response.headers ?? {} };
      },
    },
  });

  // REST: `/v1/<path>` for every procedure with `meta.openapi` (see server/rest.ts).
  registerRestRoutes(app, {
    router: appRouter,
    basePath: '/v1',
    locationBase: `${config.publicBaseUrl}/v1`,
    createContext: (req) => createHttpContext(deps, req),
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

  return app;
}
