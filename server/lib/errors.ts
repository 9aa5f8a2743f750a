/** Every error code (docs/api-conventions.md, "Errors"), with its HTTP status. The one table the whole API uses. */
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

export type ErrorCode = keyof typeof ERROR_STATUS;
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

export type ErrorDetail =
  | { path: string; message: string }
  | { resource: string; limit: number; current: number }
  | Record<string, unknown>;

/**
 * Statuses of transport errors that have no code of their own in the table above: they are answered with this
 * status and the nearest code (`VALIDATION_ERROR`: the request has to be changed to succeed). See docs/api-conventions.md "Errors".
 */
export type TransportStatus = 408 | 414 | 431;

export interface AppErrorOptions {
  details?: ErrorDetail[];
  /** Seconds, for 429 responses. */
  retryAfter?: number;
  cause?: unknown;
  /** Only for the transport errors answered before any procedure runs (see TransportStatus). */
  status?: TransportStatus;
}

/** The one error type services throw. Converted to the wire envelope in one place (server/trpc/init.ts). */
export class AppError extends Error {
  readonly details: ErrorDetail[] | undefined;
  readonly retryAfter: number | undefined;
  readonly #status: TransportStatus | undefined;
  constructor(
    public readonly code: ErrorCode,
    message: string,
    options: AppErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.details = options.details;
    this.retryAfter = options.retryAfter;
    this.#status = options.status;
  }
  /** The HTTP status: the code's own, or a transport status (408, 414, 431). */
  get status(): number {
    return this.#status ?? ERROR_STATUS[this.code];
  }
}

// The shared constructors: the one way code throws an error (docs/adding-a-module.md, "Checklist", step 3). A module
// never calls `new AppError(...)` itself (tests/kit/errors.test.ts).

/**
 * Where a client lists what it may name by id, per resource (the `what` of notFound): a 404 says where to look
 * (docs/api-conventions.md, "Errors"). Resources listed under a parent name the parent's id as `{id}`.
 */
const LISTED_AT: Record<string, string> = {
  'API key': 'GET /v1/api-keys',
  Backup: 'GET /v1/databases/{id}/backups',
  Database: 'GET /v1/databases',
  Delivery: 'GET /v1/webhooks/{id}/deliveries',
  Deployment: 'GET /v1/hosting/sites/{id}/deployments',
  Invoice: 'GET /v1/billing/invoices',
  'Login session': 'GET /v1/auth/sessions',
  'Payment method': 'GET /v1/billing/payment-methods',
  Server: 'GET /v1/vpn/servers',
  Site: 'GET /v1/hosting/sites',
  User: 'GET /v1/users',
  'VPN connection': 'GET /v1/vpn/connections',
  Webhook: 'GET /v1/webhooks',
};

/** `<what> not found`, and where to find the ids that exist when the resource is listed somewhere. */
export const notFound = (what = 'Resource') =>
  new AppError(
    'NOT_FOUND',
    LISTED_AT[what]
      ? `${what} not found: check the id, or list them with ${LISTED_AT[what]}`
      : `${what} not found`,
  );
export const forbidden = (
  message = 'You do not have permission to perform this action: ask an owner or an admin of the organization',
  details?: ErrorDetail[],
) => new AppError('FORBIDDEN', message, details ? { details } : {});
/**
 * 403: the organization signs its users in through its identity provider only (docs/sso.md); the message names the
 * way in.
 */
export const ssoRequired = (
  message = 'Your organization requires single sign-on: sign in with POST /v1/auth/sso/start',
) => new AppError('SSO_REQUIRED', message);
/**
 * 403: the organization requires two-factor sign-in of its users (docs/organization.md, "Security policies") and the
 * caller has not turned it on; the message names the way to turn it on.
 */
export const twoFactorRequired = () =>
  new AppError(
    'TWO_FACTOR_REQUIRED',
    'Your organization requires two-factor sign-in: start with POST /v1/auth/2fa/setup, then confirm a code with ' +
      'POST /v1/auth/2fa/enable {password, code}; until then only GET /v1/auth/me and POST /v1/auth/logout answer',
  );
/**
 * 403: the organization accepts requests from its allowed address ranges only (docs/organization.md, "Security
 * policies"), and `ip` is in none of them.
 */
export const ipNotAllowed = (ip: string) =>
  new AppError(
    'IP_NOT_ALLOWED',
    `Requests from ${ip} are not allowed by your organization’s security policy: call from an allowed address, or ` +
      'ask the owner to add it to allowed_ip_ranges (PUT /v1/organization/security)',
  );
export const conflict = (message: string, details?: ErrorDetail[]) =>
  new AppError('CONFLICT', message, { details });
export const unauthorized = (
  message = 'Authentication required: log in with POST /v1/auth/login, then send Authorization: Bearer <token>',
) => new AppError('UNAUTHORIZED', message);
/** 401 for an access token past its expiry (docs/accounts-and-sessions.md, "Accounts and sessions"). */
export const tokenExpired = () =>
  new AppError(
    'TOKEN_EXPIRED',
    'Access token has expired: get a new one with POST /v1/auth/refresh, or log in again with POST /v1/auth/login',
  );
/** 401 for an access token the server cannot use (malformed, forged, revoked, or its user gone). */
export const invalidAccessToken = (why = 'Invalid access token') =>
  new AppError('UNAUTHORIZED', `${why}: log in again with POST /v1/auth/login`);
/** 401 for an API key that is not (or no longer) one of the organization's. */
export const invalidApiKey = (why = 'Invalid or revoked API key') =>
  new AppError('UNAUTHORIZED', `${why}: check the key, or create a new one with POST /v1/api-keys`);
/** 401 for a secret the caller gave (password, code, token) that does not match. */
export const invalidCredentials = (message: string) => new AppError('INVALID_CREDENTIALS', message);
export const paymentFailed = (message: string) => new AppError('PAYMENT_FAILED', message);
/** 429 while the login throttle of an email and address is locked (docs/accounts-and-sessions.md, "Accounts and sessions"). */
export const tooManyLoginAttempts = (retryAfter: number) =>
  new AppError(
    'TOO_MANY_LOGIN_ATTEMPTS',
    'Too many failed login attempts: try again after Retry-After seconds (forgotten the password? ' +
      'POST /v1/auth/password-reset)',
    { retryAfter },
  );
/** 402: creating one more `resource` would exceed the plan's `limit`. */
export const planLimitExceeded = (
  message: string,
  detail: { resource: string; limit: number; current: number },
) => new AppError('PLAN_LIMIT_EXCEEDED', message, { details: [detail] });

/** 409: with real servers configured, none takes new databases of that engine and region (docs/databases.md, "Databases"). */
export const unsupportedPlacement = (message: string, details?: ErrorDetail[]) =>
  new AppError('UNSUPPORTED_PLACEMENT', message, { details });
/**
 * 409: the TXT record that proves a domain is the caller's was not found (docs/sites.md, "Custom domains"); `details`
 * name the record expected.
 */
export const domainNotVerified = (message: string, details?: ErrorDetail[]) =>
  new AppError('DOMAIN_NOT_VERIFIED', message, { details });
/** 503: a system the request needs did not answer; nothing was changed, the request can be retried. */
export const serviceUnavailable = (message: string) => new AppError('SERVICE_UNAVAILABLE', message);
/**
 * 503: no real server of the engine and region has connections left for the database's size (docs/databases.md,
 * "Capacity of a server").
 */
export const noServerCapacity = (message: string, details?: ErrorDetail[]) =>
  new AppError('NO_SERVER_CAPACITY', message, { details });

/** The one wording of a 400 `VALIDATION_ERROR`: `Invalid request: <path>: <message>` of its first detail. */
export function validationMessage(path: string, message: string): string {
  return `Invalid request: ${path ? `${path}: ` : ''}${message}`;
}
/** 400 for input: one or more `{path, message}` details, the first worded as the error's message. */
export function invalidInput(details: { path: string; message: string }[]): AppError {
  const first = details[0];
  return new AppError(
    'VALIDATION_ERROR',
    first ? validationMessage(first.path, first.message) : 'Invalid request',
    {
      details,
    },
  );
}
/** 400 for input the schema cannot judge alone (a rule across fields, a reference to another row). */
export const validation = (path: string, message: string) => invalidInput([{ path, message }]);
/** A body that is not JSON, or not parseable as JSON (docs/api-conventions.md "Errors"); one wording wherever it is detected. */
export const unsupportedMediaType = (
  message = 'Request bodies must be sent as Content-Type: application/json',
) => new AppError('UNSUPPORTED_MEDIA_TYPE', message);
export const invalidJson = (message = 'Request body is not valid JSON') =>
  new AppError('INVALID_JSON', message);

// Errors of the HTTP transport, raised before any procedure runs (server/app.ts).

/** A URL whose percent-encoding is not valid UTF-8 (`%E0%A4%A`), or that HTTP itself refuses. */
export const malformedUrl = () =>
  new AppError('VALIDATION_ERROR', 'The request URL is malformed (invalid percent-encoding)');
/** A request the HTTP parser could not read (bad request line, header syntax, framing). */
export const malformedRequest = () => new AppError('VALIDATION_ERROR', 'Malformed HTTP request');
/** A body whose framing is broken (chunked encoding, Content-Length): it cannot be read, let alone parsed. */
export const unreadableBody = () =>
  invalidJson('Request body could not be read (malformed chunked encoding or length)');
/** 414: a path segment (an id) longer than the router accepts. */
export const uriTooLong = (maxSegment: number) =>
  new AppError('VALIDATION_ERROR', `Request URL too long: a path segment exceeds ${maxSegment} characters`, {
    status: 414,
  });
/** 431: request line and headers over Node's limit. */
export const headersTooLarge = (maxBytes: number) =>
  new AppError('VALIDATION_ERROR', `Request line and headers exceed ${maxBytes} bytes`, { status: 431 });
/** 408: the request did not arrive whole in time (a client trickling its headers or body). */
export const requestTimeout = (ms: number) =>
  new AppError('VALIDATION_ERROR', `The request did not arrive whole within ${ms / 1000} s`, { status: 408 });
/** 503 to a request arriving while the server drains its connections before stopping. */
export const shuttingDown = () =>
  new AppError('SERVICE_UNAVAILABLE', 'The server is shutting down; retry the request on a new connection');
