/** Every error code of conventions §3, with its HTTP status. The one table the whole API uses. */
export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  INVALID_JSON: 400,
  UNAUTHORIZED: 401,
  TOKEN_EXPIRED: 401,
  INVALID_CREDENTIALS: 401,
  PLAN_LIMIT_EXCEEDED: 402,
  PAYMENT_FAILED: 402,
  FORBIDDEN: 403,
  HTTPS_REQUIRED: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  IDEMPOTENCY_KEY_REUSED: 422,
  RATE_LIMITED: 429,
  QUOTA_EXCEEDED: 429,
  TOO_MANY_LOGIN_ATTEMPTS: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

export type ErrorDetail =
  | { path: string; message: string }
  | { resource: string; limit: number; current: number }
  | Record<string, unknown>;

export interface AppErrorOptions {
  details?: ErrorDetail[];
  /** Seconds, for 429 responses. */
  retryAfter?: number;
  cause?: unknown;
}

/** The one error type services throw. Converted to the wire envelope in one place (server/trpc/init.ts). */
export class AppError extends Error {
  readonly details: ErrorDetail[] | undefined;
  readonly retryAfter: number | undefined;
  constructor(
    public readonly code: ErrorCode,
    message: string,
    options: AppErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.details = options.details;
    this.retryAfter = options.retryAfter;
  }
  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export const notFound = (what = 'Resource') => new AppError('NOT_FOUND', `${what} not found`);
export const forbidden = (message = 'You do not have permission to perform this action') =>
  new AppError('FORBIDDEN', message);
export const conflict = (message: string, details?: ErrorDetail[]) =>
  new AppError('CONFLICT', message, { details });
export const validation = (path: string, message: string) =>
  new AppError('VALIDATION_ERROR', message, { details: [{ path, message }] });
/** A body that is not JSON, or not parseable as JSON (conventions §1, §3); one wording wherever it is detected. */
export const unsupportedMediaType = () =>
  new AppError('UNSUPPORTED_MEDIA_TYPE', 'Request bodies must be sent as Content-Type: application/json');
export const invalidJson = () => new AppError('INVALID_JSON', 'Request body is not valid JSON');
