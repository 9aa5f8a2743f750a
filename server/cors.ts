import cors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from './config.js';

/** Request headers a browser page may send (docs/api-conventions.md, "Browsers (CORS)"); `Accept` needs no permission. */
export const CORS_ALLOWED_HEADERS = [
  'Authorization',
  'Content-Type',
  'Idempotency-Key',
  'X-Request-Id',
  // Resuming a build log's event stream where it stopped.
  'Last-Event-ID',
];
/** Response headers a page may read beside the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS = [
  'X-Request-Id',
  'Location',
  'RateLimit',
  'RateLimit-Policy',
  'Retry-After',
  'Idempotent-Replayed',
  'WWW-Authenticate',
];
export const CORS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
/** Seconds a browser may keep a preflight's answer (Chromium keeps it at most 2 hours). */
export const CORS_MAX_AGE_SECONDS = 7200;

const servesCors = (url: string) =>
  url === '/v1' ||
  url.startsWith('/v1/') ||
  url.startsWith('/v1?') ||
  url === '/trpc' ||
  url.startsWith('/trpc/');

/**
 * CORS on `/v1` and `/trpc` for the origins of `CORS_ORIGINS` (`*`: any): the API authenticates with bearer
 * tokens that a page holds itself, never with cookies, so `Access-Control-Allow-Credentials` is never sent.
 * Preflights are answered 204 here, before any route runs: they are neither rate-limited nor counted. The headers
 * are set before the request is read, so that every answer of a cross-origin call, errors included (401, 404,
 * 413, 415, 429, ...), lets the page read its envelope; Server-Sent Events carry them too. A request without
 * `Origin`, and an `OPTIONS` that is not a preflight, are left as they are (the latter is 404).
 *
 * Registered before the server's other `onRequest` hooks, whose refusals (415, 503) then carry the headers.
 */
export async function registerCors(app: FastifyInstance, config: Pick<Config, 'corsOrigins'>): Promise<void> {
  const allowed: FastifyCorsOptions = {
    origin: config.corsOrigins === '*' ? '*' : config.corsOrigins,
    methods: CORS_METHODS,
    allowedHeaders: CORS_ALLOWED_HEADERS,
    exposedHeaders: CORS_EXPOSED_HEADERS,
    maxAge: CORS_MAX_AGE_SECONDS,
    credentials: false,
  };
  const off: FastifyCorsOptions = { origin: false };
  await app.register(cors, {
    hook: 'onRequest',
    delegator(req: FastifyRequest, cb) {
      const preflightless = req.method === 'OPTIONS' && !req.headers['access-control-request-method'];
      cb(null, !req.headers.origin || preflightless || !servesCors(req.url) ? off : allowed);
    },
  });
}
