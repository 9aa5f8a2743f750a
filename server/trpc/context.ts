import type { FastifyRequest } from 'fastify';
import type { Actor } from '../access/actor.js';
import type { Config } from '../config.js';
import type { Em } from '../db/orm.js';
import type { AppDeps, RequestContext } from '../kit/deps.js';
import { newId } from '../lib/ids.js';

/** Headers a procedure adds to its response (`Location`, `Retry-After`, ...); applied by responseMeta. */
export interface ResponseMeta {
  headers: Record<string, string>;
}

/** A request's context: what services receive (ActorContext once authenticated), plus the transport's own. */
export interface Context extends RequestContext {
  /** One EntityManager per request, forked from the global one (on first use). */
  em: Em;
  /** True when the request may use /auth/* under the HTTPS rule (docs/getting-started.md, "Calling the API"). */
  secureTransport: boolean;
  bearer: string | undefined;
  /** The `Idempotency-Key` header, as sent (docs/api-conventions.md, "Idempotency"; server/trpc/idempotency.ts). */
  idempotencyKey?: string;
  /**
   * Set when the answer is the replay of a kept error answer: the transport sends this status and body as they
   * were first sent (request_id included).
   */
  replayedError?: { status: number; body: unknown };
  /** Set by the authenticated base procedures, whose procedures see it as non-null (trpc/procedures.ts). */
  actor?: Actor;
  response: ResponseMeta;
}

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;

export function isSecureTransport(req: FastifyRequest, config: Config): boolean {
  if (req.protocol === 'https' && !config.trustProxy) return true;
  if ((req.raw.socket as { encrypted?: boolean }).encrypted) return true;
  if (config.trustProxy) {
    const proto = String(req.headers['x-forwarded-proto'] ?? '')
      .split(',')[0]!
      .trim()
      .toLowerCase();
    if (proto === 'https') return true;
  }
  if (!config.isProduction && LOOPBACK.test(req.socket.remoteAddress ?? '')) return true;
  return false;
}

export function bearerFrom(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : '';
}

export function createHttpContext(deps: AppDeps, req: FastifyRequest): Context {
  // Forked on first use: requests answered from the caller's row alone (GET /auth/me) never need one.
  let em: Em | undefined;
  const key = req.headers['idempotency-key'];
  return {
    deps,
    get em() {
      return (em ??= deps.db.orm.em.fork());
    },
    // Idempotent requests run their procedure on the transaction that also keeps their answer.
    set em(value: Em) {
      em = value;
    },
    idempotencyKey: Array.isArray(key) ? key[0] : key,
    requestId: req.id,
    ip: req.ip,
    userAgent: req.headers['user-agent']?.slice(0, 512),
    secureTransport: isSecureTransport(req, deps.config),
    bearer: bearerFrom(req.headers.authorization),
    response: { headers: {} },
  };
}

/** A context for in-process calls (tests, scripts): no transport, so the HTTPS rule is satisfied. */
export function createInProcessContext(
  deps: AppDeps,
  opts: { token?: string; ip?: string; userAgent?: string; idempotencyKey?: string } = {},
): Context {
  return {
    deps,
    em: deps.db.orm.em.fork(),
    requestId: newId('req'),
    ip: opts.ip ?? '127.0.0.1',
    userAgent: opts.userAgent,
    secureTransport: true,
    bearer: opts.token,
    idempotencyKey: opts.idempotencyKey,
    response: { headers: {} },
  };
}
