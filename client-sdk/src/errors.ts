import type { ErrorCode as ServerErrorCode } from '../../server/lib/errors.js';

/** Every `error.code` the API sends (README, "Errors"), with its HTTP status. */
export const API_ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  INVALID_JSON: 400,
  UNAUTHORIZED: 401,
  TOKEN_EXPIRED: 401,
  INVALID_CREDENTIALS: 401,
  PLAN_LIMIT_EXCEEDED: 402,
  PAYMENT_FAILED: 402,
  FORBIDDEN: 403,
  HTTPS_REQUIRED: 403,
  SSO_REQUIRED: 403,
  TWO_FACTOR_REQUIRED: 403,
  IP_NOT_ALLOWED: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  UNSUPPORTED_PLACEMENT: 409,
  DOMAIN_NOT_VERIFIED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  IDEMPOTENCY_KEY_REUSED: 422,
  RATE_LIMITED: 429,
  QUOTA_EXCEEDED: 429,
  TOO_MANY_LOGIN_ATTEMPTS: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
  NO_SERVER_CAPACITY: 503,
} as const;

export type ApiErrorCode = keyof typeof API_ERROR_STATUS;

/** Codes the SDK itself produces when no API response was received. */
export type ClientErrorCode = 'CONNECTION_ERROR';

// The list above must stay the server's list: a code added on one side only fails the type check here.
type IsEqual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Expect<T extends true> = T;
type _ErrorCodesMatchServer = Expect<IsEqual<ApiErrorCode, ServerErrorCode>>;

/** One entry of `error.details`: `{path, message}` for validation, `{resource, limit, current}` for plan limits. */
export type ErrorDetail =
  | { path: string; message: string }
  | { resource: string; limit: number; current: number }
  | Record<string, unknown>;

export interface PlatformApiErrorInit {
  code: ApiErrorCode | ClientErrorCode | (string & {});
  message: string;
  /** HTTP status; 0 when no response was received. */
  status: number;
  details?: ErrorDetail[] | undefined;
  requestId?: string | undefined;
  retryAfter?: number | undefined;
  cause?: unknown;
}

/**
 * The base of every error an SDK call rejects with. `code` is the API's `error.code`, `status` the HTTP status,
 * `details` the API's `error.details` (when sent) and `requestId` the `X-Request-Id` to quote to support.
 */
export class PlatformApiError extends Error {
  readonly code: ApiErrorCode | ClientErrorCode | (string & {});
  readonly status: number;
  readonly details: ErrorDetail[] | undefined;
  readonly requestId: string | undefined;

  constructor(init: PlatformApiErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status;
    this.details = init.details;
    this.requestId = init.requestId;
  }
}

/** 400 `VALIDATION_ERROR` / `INVALID_JSON`: `details` lists `{path, message}` per problem. */
export class ValidationError extends PlatformApiError {}
/** 401 `UNAUTHORIZED`, `TOKEN_EXPIRED`, `INVALID_CREDENTIALS`. */
export class AuthenticationError extends PlatformApiError {}
/** 402 `PLAN_LIMIT_EXCEEDED`: `details` names `{resource, limit, current}`. */
export class PlanLimitError extends PlatformApiError {}
/** 402 `PAYMENT_FAILED`: a charge the request needed was declined; nothing changed. */
export class PaymentFailedError extends PlatformApiError {}
/**
 * 403 `FORBIDDEN`, `HTTPS_REQUIRED`; `SSO_REQUIRED`: the organization signs its users in through its identity provider
 * only (sign in with `loginWithSsoCode` after `POST /auth/sso/start`).
 */
export class PermissionError extends PlatformApiError {}
/** 404 `NOT_FOUND`: unknown id, or a resource that is not yours. */
export class NotFoundError extends PlatformApiError {}
/**
 * 409 `CONFLICT`: duplicate, invalid state, idempotency key in flight; `UNSUPPORTED_PLACEMENT`: no database server;
 * `DOMAIN_NOT_VERIFIED`: a custom domain's TXT record was not found.
 */
export class ConflictError extends PlatformApiError {}
/** 413 `PAYLOAD_TOO_LARGE`. */
export class PayloadTooLargeError extends PlatformApiError {}
/** 415 `UNSUPPORTED_MEDIA_TYPE`. */
export class UnsupportedMediaTypeError extends PlatformApiError {}
/** 422 `IDEMPOTENCY_KEY_REUSED`. */
export class IdempotencyError extends PlatformApiError {}
/** 429 `RATE_LIMITED`, `QUOTA_EXCEEDED`, `TOO_MANY_LOGIN_ATTEMPTS`: wait `retryAfter` seconds. */
export class RateLimitError extends PlatformApiError {
  /** Seconds to wait before trying again (the `Retry-After` header); undefined if the server sent none. */
  readonly retryAfter: number | undefined;
  constructor(init: PlatformApiErrorInit) {
    super(init);
    this.retryAfter = init.retryAfter;
  }
}
/** 500 `INTERNAL_ERROR` (and any other 5xx without a more specific class). */
export class InternalServerError extends PlatformApiError {}
/**
 * 503 `SERVICE_UNAVAILABLE`: the service or its database is unreachable; safe to retry later. `NO_SERVER_CAPACITY`:
 * no database server of the engine and region has connections left for the size.
 */
export class ServiceUnavailableError extends PlatformApiError {}
/** No HTTP response: the network failed, the server is unreachable, or the call was aborted. `status` is 0. */
export class ConnectionError extends PlatformApiError {}

type ErrorClass = new (init: PlatformApiErrorInit) => PlatformApiError;

const CLASS_BY_STATUS: Record<number, ErrorClass> = {
  400: ValidationError,
  401: AuthenticationError,
  402: PlanLimitError,
  403: PermissionError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  415: UnsupportedMediaTypeError,
  422: IdempotencyError,
  429: RateLimitError,
  500: InternalServerError,
  503: ServiceUnavailableError,
};

/**
 * Builds the error class that matches the code, or for a code this SDK does not know, the HTTP status (a newer
 * server may add codes; they still land in the class of their status).
 */
export function createPlatformError(init: PlatformApiErrorInit): PlatformApiError {
  const status = Object.hasOwn(API_ERROR_STATUS, init.code)
    ? API_ERROR_STATUS[init.code as ApiErrorCode]
    : init.status;
  const Class =
    (init.code === 'PAYMENT_FAILED' ? PaymentFailedError : undefined) ??
    CLASS_BY_STATUS[status] ??
    (status >= 500 ? InternalServerError : status === 0 ? ConnectionError : PlatformApiError);
  return new Class(init);
}

/** The same error with `cause` set (errors are immutable once thrown). */
export function withCause(error: PlatformApiError, cause: unknown): PlatformApiError {
  return createPlatformError({
    code: error.code,
    message: error.message,
    status: error.status,
    details: error.details,
    requestId: error.requestId,
    retryAfter: error instanceof RateLimitError ? error.retryAfter : undefined,
    cause,
  });
}

/** A generic code for a status when the response carried no API error body (a proxy's HTML page, say). */
export function codeForStatus(status: number): ApiErrorCode | 'HTTP_ERROR' {
  switch (status) {
    case 400:
      return 'VALIDATION_ERROR';
    case 401:
      return 'UNAUTHORIZED';
    case 402:
      return 'PLAN_LIMIT_EXCEEDED';
    case 403:
      return 'FORBIDDEN';
    case 404:
      return 'NOT_FOUND';
    case 409:
      return 'CONFLICT';
    case 413:
      return 'PAYLOAD_TOO_LARGE';
    case 415:
      return 'UNSUPPORTED_MEDIA_TYPE';
    case 422:
      return 'IDEMPOTENCY_KEY_REUSED';
    case 429:
      return 'RATE_LIMITED';
    case 503:
      return 'SERVICE_UNAVAILABLE';
    default:
      return status >= 500 ? 'INTERNAL_ERROR' : 'HTTP_ERROR';
  }
}
