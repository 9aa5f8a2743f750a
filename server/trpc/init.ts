import { initTRPC, TRPCError } from '@trpc/server';
import type { TRPC_ERROR_CODE_KEY } from '@trpc/server/rpc';
import type { OpenApiMeta } from 'trpc-to-openapi';
import { ZodError } from 'zod';
import { NotFoundError, UniqueConstraintViolationException, ConnectionException } from '@mikro-orm/core';
import {
  AppError,
  ERROR_STATUS,
  invalidInput,
  invalidJson,
  unsupportedMediaType,
  type ErrorCode,
  type ErrorDetail,
} from '../lib/errors.js';
import { checkInput } from '../lib/input-limits.js';
import type { Permission } from '../access/permissions.js';
import type { Role } from '../access/user.entity.js';
import type { Context } from './context.js';

export interface AppMeta {
  [key: string]: unknown;
  /** Who may call: set by the base procedures, read by the security-table tests and the OpenAPI post-processing. */
  auth?: 'public' | 'user' | 'permission' | 'role';
  permission?: Permission;
  /** With `auth: 'role'`: the roles that may call (e.g. webhooks: owner and admin, docs/users-and-permissions.md). */
  roles?: readonly Role[];
  /** Success status other than 200 (docs/api-conventions.md, "The envelope"). */
  successStatus?: 201 | 202;
  /**
   * With 201: the path (under `/v1`) of the created resource, with `{field.path}` placeholders read from the
   * procedure's output, e.g. `/vpn/connections/{connection.id}`. The transport sends it as the `Location` header;
   * services never write headers.
   */
  location?: string;
  /**
   * The procedure may also answer `Accept: text/event-stream` on `/v1` (server/lib/event-stream.ts): same
   * authentication, permission, scoping and errors as its JSON answer.
   */
  eventStream?: true;
  /**
   * A `DELETE` whose input is a JSON body rather than query parameters (`DELETE /organization {confirm, password}`:
   * a password never goes in a URL). The OpenAPI document shows it as a request body.
   */
  deleteWithBody?: true;
  /**
   * The error codes the base procedure answers whatever the procedure does (token, burst and quota, permission,
   * the HTTPS rule), set by the base procedures of server/trpc/procedures.ts. The OpenAPI document declares them.
   */
  baseErrors?: readonly ErrorCode[];
  /**
   * The error codes the procedure's own service answers (beyond invalid input, an unknown path id and the base
   * procedure's), each with when. The OpenAPI document declares their statuses and codes from this, and the contract
   * test (tests/support/contract.ts) fails any test that sees an undeclared status.
   */
  errors?: Partial<Record<ErrorCode, string>>;
  /**
   * How an `Idempotency-Key` is honoured (server/trpc/idempotency.ts): by default the procedure runs in the
   * transaction that keeps its answer; `after-commit` for procedures that must not hold a transaction across
   * their work (an outbound HTTP call, a password hash): the answer is kept right after, in its own transaction.
   */
  idempotency?: 'after-commit';
}
export type Meta = OpenApiMeta<AppMeta>;

const TRPC_CODE: Record<ErrorCode, TRPC_ERROR_CODE_KEY> = {
  VALIDATION_ERROR: 'BAD_REQUEST',
  INVALID_JSON: 'BAD_REQUEST',
  UNAUTHORIZED: 'UNAUTHORIZED',
  TOKEN_EXPIRED: 'UNAUTHORIZED',
  INVALID_CREDENTIALS: 'UNAUTHORIZED',
  PLAN_LIMIT_EXCEEDED: 'PAYMENT_REQUIRED',
  PAYMENT_FAILED: 'PAYMENT_REQUIRED',
  FORBIDDEN: 'FORBIDDEN',
  HTTPS_REQUIRED: 'FORBIDDEN',
  SSO_REQUIRED: 'FORBIDDEN',
  TWO_FACTOR_REQUIRED: 'FORBIDDEN',
  IP_NOT_ALLOWED: 'FORBIDDEN',
  NOT_FOUND: 'NOT_FOUND',
  CONFLICT: 'CONFLICT',
  UNSUPPORTED_PLACEMENT: 'CONFLICT',
  DOMAIN_NOT_VERIFIED: 'CONFLICT',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  IDEMPOTENCY_KEY_REUSED: 'UNPROCESSABLE_CONTENT',
  RATE_LIMITED: 'TOO_MANY_REQUESTS',
  QUOTA_EXCEEDED: 'TOO_MANY_REQUESTS',
  TOO_MANY_LOGIN_ATTEMPTS: 'TOO_MANY_REQUESTS',
  INTERNAL_ERROR: 'INTERNAL_SERVER_ERROR',
  SERVICE_UNAVAILABLE: 'SERVICE_UNAVAILABLE',
  NO_SERVER_CAPACITY: 'SERVICE_UNAVAILABLE',
};

/** Which app code a bare TRPCError (thrown by tRPC itself) stands for. */
const FROM_TRPC_CODE: Partial<Record<TRPC_ERROR_CODE_KEY, ErrorCode>> = {
  PARSE_ERROR: 'INVALID_JSON',
  BAD_REQUEST: 'VALIDATION_ERROR',
  UNAUTHORIZED: 'UNAUTHORIZED',
  FORBIDDEN: 'FORBIDDEN',
  NOT_FOUND: 'NOT_FOUND',
  METHOD_NOT_SUPPORTED: 'NOT_FOUND',
  CONFLICT: 'CONFLICT',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  TOO_MANY_REQUESTS: 'RATE_LIMITED',
  PAYMENT_REQUIRED: 'PLAN_LIMIT_EXCEEDED',
  UNPROCESSABLE_CONTENT: 'IDEMPOTENCY_KEY_REUSED',
  SERVICE_UNAVAILABLE: 'SERVICE_UNAVAILABLE',
};

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

/**
 * The database cannot be reached (503), as opposed to a query that failed (500): network errors of the driver,
 * PostgreSQL's connection classes (08xxx, shutdown 57P0x, too many connections 53300), a pool or embedded database
 * that is closed.
 */
function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof ConnectionException) return true;
  if (!(err instanceof Error)) return false;
  const e = err as Error & { code?: unknown; sqlState?: unknown };
  const code = typeof e.code === 'string' ? e.code : typeof e.sqlState === 'string' ? e.sqlState : '';
  if (UNREACHABLE_CODES.has(code) || code.startsWith('08') || /^57P0[123]$/.test(code) || code === '53300')
    return true;
  // Raw queries (the per-request actor lookup) reach us as the driver's own errors, not wrapped by the ORM.
  return /Connection terminated|connection timeout|PGlite is closed|pool is (closed|destroyed)/i.test(
    err.message,
  );
}

/**
 * A unique index refused a write (SQLSTATE 23505), whichever class the error reached us as: the ORM's own
 * exception class is not always the one `instanceof` sees (two copies of the ORM's core can be loaded), and raw
 * queries raise the driver's error.
 */
function isUniqueViolation(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const x = e as Error & { code?: unknown; sqlState?: unknown; name: string };
    if (x.code === '23505' || x.sqlState === '23505' || x.name === 'UniqueConstraintViolationException')
      return true;
  }
  return false;
}

/** Turns anything a procedure threw into an AppError. Unknown errors become a generic INTERNAL_ERROR. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof TRPCError) {
    if (err.cause instanceof AppError) return err.cause;
    if (err.cause instanceof ZodError) return zodToAppError(err.cause);
    // /trpc parses bodies and `?input=` itself: its JSON.parse failure arrives as BAD_REQUEST.
    if (err.cause instanceof SyntaxError) return invalidJson();
    const code = FROM_TRPC_CODE[err.code];
    if (code === 'INVALID_JSON') return invalidJson();
    if (code === 'UNSUPPORTED_MEDIA_TYPE') return unsupportedMediaType();
    if (code) return new AppError(code, err.message || 'Request failed', { cause: err });
    if (err.cause && err.cause !== err) return toAppError(err.cause);
    return new AppError('INTERNAL_ERROR', 'Internal server error', { cause: err });
  }
  if (err instanceof ZodError) return zodToAppError(err);
  if (err instanceof NotFoundError) return new AppError('NOT_FOUND', 'Resource not found', { cause: err });
  if (err instanceof UniqueConstraintViolationException || isUniqueViolation(err))
    return new AppError(
      'CONFLICT',
      'A resource with the same unique value already exists: choose another value',
      { cause: err },
    );
  if (isDatabaseUnavailable(err))
    return new AppError('SERVICE_UNAVAILABLE', 'Service temporarily unavailable', { cause: err });
  return new AppError('INTERNAL_ERROR', 'Internal server error', { cause: err });
}

export function zodToAppError(err: ZodError): AppError {
  const details: { path: string; message: string }[] = [];
  for (const issue of err.issues) {
    const base = issue.path.map(String);
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys)
        details.push({ path: [...base, key].join('.'), message: 'Unknown field' });
    } else {
      details.push({ path: base.join('.'), message: issue.message });
    }
  }
  return invalidInput(details);
}

export interface ErrorData {
  /** Our error code (docs/api-conventions.md, "Errors"). */
  code: ErrorCode;
  httpStatus: number;
  message: string;
  details?: ErrorDetail[];
  request_id?: string;
  retry_after?: number;
}

const t = initTRPC
  .context<Context>()
  .meta<Meta>()
  .create({
    // Never a stack trace, SQL or driver message: the shape carries only what toAppError decided to expose.
    errorFormatter({ shape, error, ctx }) {
      const app = toAppError(error);
      const data: ErrorData = {
        code: app.code,
        httpStatus: ERROR_STATUS[app.code],
        message: app.message,
        ...(app.details ? { details: app.details } : {}),
        ...(ctx?.requestId ? { request_id: ctx.requestId } : {}),
        ...(app.retryAfter !== undefined ? { retry_after: app.retryAfter } : {}),
      };
      return { message: app.message, code: shape.code, data };
    },
  });

export const router = t.router;
export const middleware = t.middleware;
export const baseProcedure = t.procedure;
export const createCallerFactory = t.createCallerFactory;

/**
 * Converts anything a procedure threw into the TRPCError whose code gives the right HTTP status, with the
 * `Retry-After` / `WWW-Authenticate` headers its code calls for. Unexpected errors are logged here, once.
 */
export function rethrowAsTRPCError(ctx: Context, err: unknown): never {
  const app = toAppError(err);
  if (app.code === 'INTERNAL_ERROR' || app.code === 'SERVICE_UNAVAILABLE') {
    ctx.deps.log.error({ err: app.cause ?? err, requestId: ctx.requestId }, 'request failed');
  }
  if (app.retryAfter !== undefined) ctx.response.headers['Retry-After'] = String(app.retryAfter);
  if (ERROR_STATUS[app.code] === 401) ctx.response.headers['WWW-Authenticate'] = 'Bearer';
  throw new TRPCError({ code: TRPC_CODE[app.code], message: app.message, cause: app });
}

/**
 * Refuses the raw input of a call that no schema may receive: text the database cannot store (NUL, lone
 * surrogates) and nesting beyond the depth limit (server/lib/input-limits.ts), with 400 `VALIDATION_ERROR`. Run by
 * the one middleware of every base procedure, before the input reaches the procedure's schema, so it covers `/v1`
 * (body, query and path values), `/trpc` and in-process callers alike.
 */
export async function assertAcceptableInput(getRawInput: () => Promise<unknown>): Promise<void> {
  const err = checkInput(await getRawInput());
  if (err) throw err;
}

/** Refuses unacceptable input (assertAcceptableInput) and converts every thrown error into a TRPCError whose code gives the right HTTP status. */
export const errorMiddleware = t.middleware(async ({ next, ctx, getRawInput }) => {
  try {
    await assertAcceptableInput(getRawInput);
  } catch (err) {
    rethrowAsTRPCError(ctx, err);
  }
  const result = await next();
  if (!result.ok) rethrowAsTRPCError(ctx, result.error);
  return result;
});
