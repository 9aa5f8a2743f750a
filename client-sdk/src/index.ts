import {
  createTRPCClientProxy,
  httpLink,
  isTRPCClientError,
  TRPCUntypedClient,
  type TRPCClient,
  type TRPCRequestOptions,
} from '@trpc/client';
import type { inferRouterInputs, inferRouterOutputs } from '@trpc/server';
// Type-only: the router's types describe every procedure; none of the server's code is part of the SDK.
import type { AppRouter } from '../../server/router.js';
import {
  ConnectionError,
  PlatformApiError,
  RateLimitError,
  codeForStatus,
  createPlatformError,
  type ErrorDetail,
} from './errors.js';
import { followDeploymentLogs, type DeploymentLogStream, type FollowLogsOptions } from './logs.js';
import { Session, type IssuedTokens, type RefreshResponse, type TokenPair } from './session.js';

export {
  API_ERROR_STATUS,
  AuthenticationError,
  ConflictError,
  ConnectionError,
  IdempotencyError,
  InternalServerError,
  NotFoundError,
  PayloadTooLargeError,
  PaymentFailedError,
  PermissionError,
  PlanLimitError,
  PlatformApiError,
  RateLimitError,
  ServiceUnavailableError,
  UnsupportedMediaTypeError,
  ValidationError,
  type ApiErrorCode,
  type ClientErrorCode,
  type ErrorDetail,
  type PlatformApiErrorInit,
} from './errors.js';
export type { IssuedTokens, TokenPair } from './session.js';
export type { BuildLogLine, DeploymentLogStream, DeploymentStatus, FollowLogsOptions } from './logs.js';
export type { AppRouter };

/** Inputs of every procedure: `RouterInputs['auth']['login']`. */
export type RouterInputs = inferRouterInputs<AppRouter>;
/** Outputs of every procedure: `RouterOutputs['auth']['me']['user']`. */
export type RouterOutputs = inferRouterOutputs<AppRouter>;

/** A `fetch` the SDK can use (the global one by default). */
export type Fetch = (url: string, init: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** The API's address, e.g. `https://api.example.com` (a trailing `/v1` is accepted). Calls go to `<baseUrl>/trpc`. */
  baseUrl: string;
  /**
   * An API key (`sk_…`, from `POST /v1/api-keys`), instead of a token pair: sent as the bearer token of every call.
   * A key does not expire mid-session and is never refreshed; `token`, `getToken` and `refreshToken` are ignored.
   */
  apiKey?: string;
  /**
   * How many times a call is sent again after a network failure, a 429 `RATE_LIMITED` (after its `Retry-After`)
   * or a 500/503 (default 0). A mutation is retried with the `Idempotency-Key` of its first attempt, so the
   * server runs it at most once.
   */
  maxRetries?: number;
  /** An access token to start with. The client replaces it after `login()` and each automatic refresh. */
  token?: string;
  /**
   * Where the application keeps the access token: asked before every call, instead of the stored token. Store
   * what `onTokens` receives so that it returns the new token after a refresh.
   */
  getToken?: () => string | null | undefined | Promise<string | null | undefined>;
  /** A refresh token: a call that fails with `TOKEN_EXPIRED` then refreshes the pair and is retried once. */
  refreshToken?: string;
  /** Called with every pair the client obtains (login, refresh), to persist it. Refresh tokens are single use. */
  onTokens?: (tokens: IssuedTokens) => void | Promise<void>;
  /** A `fetch` implementation (tests, proxies, other runtimes). Default: the global `fetch`. */
  fetch?: Fetch;
}

/** The body of a completed sign-in: the token pair and the user. */
export type LoginResult = RouterOutputs['auth']['twoFactor']['verify'];
/** The second factor a user with two-factor sign-in gives: a code of their authenticator app, or a recovery code. */
export type SecondFactor = { code: string } | { recovery_code: string };

export interface LoginOptions {
  /**
   * Asked for the second factor when the user has two-factor sign-in on (within `expiresIn` seconds). Without it,
   * such a login rejects with {@link TwoFactorRequiredError}, to be completed with `verifyTwoFactor`.
   */
  twoFactor?: (challenge: { expiresIn: number }) => SecondFactor | Promise<SecondFactor>;
}

/**
 * The password was right and the user has two-factor sign-in on: complete the sign-in with
 * `client.verifyTwoFactor(error.challengeToken, { code })` within `expiresIn` seconds.
 */
export class TwoFactorRequiredError extends Error {
  constructor(
    readonly challengeToken: string,
    readonly expiresIn: number,
  ) {
    super('Two-factor sign-in: give the code of the authenticator app to verifyTwoFactor()');
    this.name = 'TwoFactorRequiredError';
  }
}

/** The few helpers beside the procedures. */
export interface ClientHelpers {
  /**
   * `auth.login`, then stores the token pair (and passes it to `onTokens`). For a user with two-factor sign-in on,
   * asks `options.twoFactor` for the code and completes the sign-in, or rejects with {@link TwoFactorRequiredError}.
   */
  login: (email: string, password: string, options?: LoginOptions) => Promise<LoginResult>;
  /** `auth.twoFactor.verify` with the challenge of a login, then stores the token pair. */
  verifyTwoFactor: (challengeToken: string, factor: SecondFactor) => Promise<LoginResult>;
  /**
   * `sso.token` with the one-time code a single sign-on ended with (the `?code=` sent to `return_to` of
   * `sso.start`, good once for 60 seconds), then stores the token pair (and passes it to `onTokens`), as `login` does.
   */
  loginWithSsoCode: (code: string) => Promise<LoginResult>;
  /** `auth.logout` (revokes the token and its refresh token), then forgets the stored pair. */
  logout: () => Promise<RouterOutputs['auth']['logout']>;
  /** Replaces the stored pair (for tokens obtained elsewhere, e.g. `auth.register`); `null` forgets it. */
  setTokens: (tokens: Partial<TokenPair> | null) => void;
  /** The stored pair (not the one `getToken` returns). */
  getTokens: () => { token: string | undefined; refreshToken: string | undefined };
  /**
   * Follows a deployment's build log as it is written (Server-Sent Events of
   * `GET /v1/hosting/sites/{siteId}/deployments/{deploymentId}/logs`): `for await (const line of stream)`, until the
   * build ends (`stream.status` then holds its final status). Reconnects where it stopped if the connection drops.
   */
  followDeploymentLogs: (
    siteId: string,
    deploymentId: string,
    options?: FollowLogsOptions,
  ) => DeploymentLogStream;
}

/**
 * Every procedure as `client.<module>.<name>.query(input)` (reads) or `.mutate(input)` (writes), typed from the
 * server's router, plus the helpers. Every call rejects with a {@link PlatformApiError} subclass.
 */
export type PlatformClient = TRPCClient<AppRouter> & ClientHelpers;

// A module named like a helper would be hidden by it: this fails to compile if the router ever gains one.
type Expect<T extends true> = T;
type _NoHelperShadowsAModule = Expect<
  [Extract<keyof AppRouter['_def']['record'], keyof ClientHelpers>] extends [never] ? true : false
>;

const TOKEN_CONTEXT_KEY = 'platformAccessToken';
/**
 * The `Idempotency-Key` of a mutation (README, "Idempotency"): generated once per call and sent with each of its
 * attempts. A caller may give its own, e.g. to retry across restarts of the program:
 * `client.vpn.connections.create.mutate(input, { context: { idempotencyKey: 'order-1234' } })`.
 */
const IDEMPOTENCY_CONTEXT_KEY = 'idempotencyKey';

/** A fresh key: a random UUID (Web Crypto, present in Node 19+ and browsers). */
function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID();
}

/** Whether a failed attempt may be sent again (the same key makes that safe for mutations). */
function retryable(err: PlatformApiError): boolean {
  if (err instanceof ConnectionError) return !/aborted/.test(err.message);
  return err.code === 'RATE_LIMITED' || err.status === 500 || err.status === 503;
}

/** Delay before retry `attempt` (1-based): the server's `Retry-After` if it gave one, else 0.5 s, 1 s, 2 s, … ±25 %. */
function retryDelayMs(err: PlatformApiError, attempt: number): number {
  if (err instanceof RateLimitError && err.retryAfter !== undefined)
    return Math.min(err.retryAfter, 60) * 1000;
  const base = Math.min(500 * 2 ** (attempt - 1), 8000);
  return base * (0.75 + Math.random() * 0.5);
}

/** The fields of `error.data` that the API sends with every error (README, "Errors"). */
interface WireErrorData {
  code?: unknown;
  httpStatus?: unknown;
  message?: unknown;
  details?: unknown;
  request_id?: unknown;
  retry_after?: unknown;
}

function retryAfterSeconds(value: string | null | undefined): number | undefined {
  if (!value) return undefined;
  const n = Number(value);
  if (Number.isFinite(n) && n >= 0) return n;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** Converts whatever a tRPC call rejected with into the matching PlatformApiError subclass. */
export function toPlatformError(err: unknown): PlatformApiError {
  if (err instanceof PlatformApiError) return err;
  if (isTRPCClientError(err)) {
    if (err.cause instanceof PlatformApiError) return err.cause;
    const data = (err.data ?? undefined) as WireErrorData | undefined;
    const response = err.meta?.response as Response | undefined;
    const headerRequestId = response?.headers.get('x-request-id') ?? undefined;
    const headerRetryAfter = retryAfterSeconds(response?.headers.get('retry-after'));
    if (data && typeof data.code === 'string') {
      return createPlatformError({
        code: data.code,
        message: typeof data.message === 'string' ? data.message : err.message,
        status: typeof data.httpStatus === 'number' ? data.httpStatus : (response?.status ?? 500),
        details: Array.isArray(data.details) ? (data.details as ErrorDetail[]) : undefined,
        requestId: typeof data.request_id === 'string' ? data.request_id : headerRequestId,
        retryAfter: typeof data.retry_after === 'number' ? data.retry_after : headerRetryAfter,
        cause: err,
      });
    }
    if (response) {
      return createPlatformError({
        code: codeForStatus(response.status),
        message: `Unexpected response from the API (HTTP ${response.status})`,
        status: response.status,
        requestId: headerRequestId,
        retryAfter: headerRetryAfter,
        cause: err,
      });
    }
    return connectionError(err.cause ?? err);
  }
  return connectionError(err);
}

function connectionError(cause: unknown): ConnectionError {
  const aborted = cause instanceof Error && (cause.name === 'AbortError' || cause.name === 'TimeoutError');
  const reason = cause instanceof Error && cause.message ? `: ${cause.message}` : '';
  return new ConnectionError({
    code: 'CONNECTION_ERROR',
    message: aborted ? 'The request was aborted' : `Could not reach the API${reason}`,
    status: 0,
    cause,
  });
}

/**
 * The fetch handed to tRPC: network failures become ConnectionError, and a response that is not JSON (a proxy's
 * error page) becomes the error of its status instead of a parse failure.
 */
function transportFetch(base: Fetch) {
  return async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    let res: Response;
    try {
      // tRPC passes the address as a string; the other forms fetch accepts are reduced to theirs.
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      res = await base(url, init ?? {});
    } catch (cause) {
      throw connectionError(cause);
    }
    if (!/json/i.test(res.headers.get('content-type') ?? '')) {
      await res.body?.cancel().catch(() => undefined);
      throw createPlatformError({
        code: codeForStatus(res.status),
        message: `Unexpected response from the API (HTTP ${res.status})`,
        status: res.status,
        requestId: res.headers.get('x-request-id') ?? undefined,
        retryAfter: retryAfterSeconds(res.headers.get('retry-after')),
      });
    }
    return res;
  };
}

function withToken(
  opts: TRPCRequestOptions | undefined,
  token: string | undefined,
  idempotencyKey?: string,
): TRPCRequestOptions {
  return {
    ...opts,
    context: {
      ...opts?.context,
      [TOKEN_CONTEXT_KEY]: token,
      ...(idempotencyKey === undefined ? {} : { [IDEMPOTENCY_CONTEXT_KEY]: idempotencyKey }),
    },
  };
}

/** The untyped client behind the typed proxy: adds the bearer token, converts errors, refreshes on expiry. */
class PlatformTransport extends TRPCUntypedClient<AppRouter> {
  readonly session: Session;
  readonly #maxRetries: number;

  constructor(options: ClientOptions, url: string) {
    const fetchImpl: Fetch = options.fetch ?? ((u, init) => globalThis.fetch(u, init));
    super({
      links: [
        httpLink<AppRouter>({
          url,
          fetch: transportFetch(fetchImpl),
          headers: ({ op }) => {
            const headers: Record<string, string> = {};
            const token = op.context[TOKEN_CONTEXT_KEY];
            if (typeof token === 'string' && token) headers.authorization = `Bearer ${token}`;
            const key = op.context[IDEMPOTENCY_CONTEXT_KEY];
            if (op.type === 'mutation' && typeof key === 'string') headers['idempotency-key'] = key;
            return headers;
          },
        }),
      ],
    });
    // An API key is a bearer token that is never refreshed.
    const credentials = options.apiKey
      ? { token: options.apiKey, getToken: undefined, refreshToken: undefined, onTokens: undefined }
      : options;
    this.session = new Session(credentials, (refreshToken) =>
      this.anonymous<RefreshResponse>('auth.refresh', { refresh_token: refreshToken }),
    );
    this.#maxRetries = Math.max(0, Math.floor(options.maxRetries ?? 0));
  }

  /** Runs `attempt` again on retryable failures, up to `maxRetries` times. */
  async #withRetries<T>(attempt: () => Promise<T>): Promise<T> {
    for (let n = 0; ; n++) {
      try {
        return await attempt();
      } catch (err) {
        const error = err as PlatformApiError;
        if (n >= this.#maxRetries || !retryable(error)) throw error;
        await new Promise((r) => setTimeout(r, retryDelayMs(error, n + 1)));
      }
    }
  }

  override query(path: string, input?: unknown, opts?: TRPCRequestOptions): Promise<unknown> {
    return this.#withRetries(() =>
      this.session.authorized((token) =>
        super.query(path, input, withToken(opts, token)).catch((err: unknown) => {
          throw toPlatformError(err);
        }),
      ),
    );
  }

  /**
   * Every mutation carries an `Idempotency-Key` (the caller's `context.idempotencyKey`, or a new one), the same on
   * each of its attempts: after a refresh, and on the retries of `maxRetries`.
   */
  override mutation(path: string, input?: unknown, opts?: TRPCRequestOptions): Promise<unknown> {
    const given = opts?.context?.[IDEMPOTENCY_CONTEXT_KEY];
    const key = typeof given === 'string' && given ? given : newIdempotencyKey();
    return this.#withRetries(() =>
      this.session.authorized((token) =>
        super.mutation(path, input, withToken(opts, token, key)).catch((err: unknown) => {
          throw toPlatformError(err);
        }),
      ),
    );
  }

  /** A mutation sent without any token (login, refresh). */
  async anonymous<T>(path: string, input: unknown): Promise<T> {
    try {
      return (await super.mutation(path, input)) as T;
    } catch (err) {
      throw toPlatformError(err);
    }
  }
}

function apiUrl(baseUrl: string, path: '/trpc' | '/v1'): string {
  const url = new URL(baseUrl);
  url.pathname = `${url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '')}${path}`;
  return url.toString().replace(/\/$/, '');
}

/**
 * Creates a client for the API.
 *
 * ```ts
 * const client = createClient({ baseUrl: 'https://api.example.com', onTokens: save });
 * await client.login('ada@example.com', 'correct-horse-battery');
 * const { user } = await client.auth.me.query();
 * ```
 */
export function createClient(options: ClientOptions): PlatformClient {
  const transport = new PlatformTransport(options, apiUrl(options.baseUrl, '/trpc'));
  const { session } = transport;
  const procedures = createTRPCClientProxy<AppRouter>(transport);

  const helpers: ClientHelpers = {
    async login(email, password, options = {}) {
      const res = await transport.anonymous<RouterOutputs['auth']['login']>('auth.login', {
        email,
        password,
      });
      if ('two_factor_required' in res) {
        if (!options.twoFactor) throw new TwoFactorRequiredError(res.challenge_token, res.expires_in);
        const factor = await options.twoFactor({ expiresIn: res.expires_in });
        return helpers.verifyTwoFactor(res.challenge_token, factor);
      }
      await session.issued({ token: res.token, refreshToken: res.refresh_token, expiresIn: res.expires_in });
      return res;
    },
    async verifyTwoFactor(challengeToken, factor) {
      const res = await transport.anonymous<LoginResult>('auth.twoFactor.verify', {
        challenge_token: challengeToken,
        ...factor,
      });
      await session.issued({ token: res.token, refreshToken: res.refresh_token, expiresIn: res.expires_in });
      return res;
    },
    async loginWithSsoCode(code) {
      const res = await transport.anonymous<LoginResult>('sso.token', { code });
      await session.issued({ token: res.token, refreshToken: res.refresh_token, expiresIn: res.expires_in });
      return res;
    },
    async logout() {
      try {
        return await procedures.auth.logout.mutate({});
      } finally {
        session.setTokens(null);
      }
    },
    setTokens: (tokens) => session.setTokens(tokens),
    getTokens: () => session.getTokens(),
    followDeploymentLogs: (siteId, deploymentId, followOptions) =>
      followDeploymentLogs(
        {
          restBase: apiUrl(options.baseUrl, '/v1'),
          fetch: options.fetch ?? ((u, init) => globalThis.fetch(u, init)),
          authorized: (send) => session.authorized(send),
        },
        siteId,
        deploymentId,
        followOptions,
      ),
  };

  return new Proxy(Object.create(null) as PlatformClient, {
    get(_target, key) {
      if (typeof key === 'string' && Object.hasOwn(helpers, key)) return helpers[key as keyof ClientHelpers];
      return (procedures as unknown as Record<string | symbol, unknown>)[key];
    },
  });
}
