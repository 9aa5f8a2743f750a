import type { inferRouterOutputs } from '@trpc/server';
// Type-only, like the rest of the SDK.
import type { AppRouter } from '../../server/router.js';
import { codeForStatus, createPlatformError, type ErrorDetail, type PlatformApiError } from './errors.js';

type Logs = inferRouterOutputs<AppRouter>['hosting']['deployments']['logs'];

/** One line of a build log: `seq` counts from 1. */
export type BuildLogLine = Logs['logs'][number];
/** A deployment's status (`queued`, `building`, `success`, `failed`, `canceled`). */
export type DeploymentStatus = Logs['status'];

export interface FollowLogsOptions {
  /** Only the lines after this `seq` (default 0: from the first line). */
  after?: number;
  /** Stops following: the iteration ends quietly. */
  signal?: AbortSignal;
  /** Reconnections in a row when the connection drops before the build ended (default 5). */
  maxReconnects?: number;
  /** Milliseconds before the first reconnection, doubled for each further one (default 500). */
  reconnectDelayMs?: number;
}

/**
 * The lines of a build log as they are written: iterate it with `for await`. The iteration ends when the build
 * ended (then `status` holds its final status), or when `signal` aborts. A connection that drops in the middle is
 * opened again where it stopped (`Last-Event-ID`), so no line is skipped or repeated.
 */
export interface DeploymentLogStream extends AsyncIterable<BuildLogLine> {
  /** The final status, once the stream ended with it; undefined before (or if aborted). */
  readonly status: DeploymentStatus | undefined;
}

/** What the client hands the follower: where the API is, how to fetch, and the session's token handling. */
export interface LogFollowerTransport {
  /** `<api>/v1` */
  restBase: string;
  fetch: (url: string, init: RequestInit) => Promise<Response>;
  /** Runs `send` with the current access token, refreshing it once on `TOKEN_EXPIRED`. */
  authorized<T>(send: (token: string | undefined) => Promise<T>): Promise<T>;
}

interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

/** Parses a `text/event-stream` body (comment lines, such as heartbeats, are skipped). */
async function* parseEventStream(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer = (buffer + decoder.decode(value, { stream: true })).replace(/\r\n?/g, '\n');
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event: SseEvent = { data: '' };
        let hasData = false;
        for (const line of block.split('\n')) {
          if (line === '' || line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'id') event.id = value;
          else if (field === 'event') event.event = value;
          else if (field === 'data') {
            event.data = hasData ? `${event.data}\n${value}` : value;
            hasData = true;
          }
        }
        if (hasData) yield event;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** The API's error envelope (or the status alone, for a response that is not from the API). */
async function errorFrom(res: Response): Promise<PlatformApiError> {
  const requestId = res.headers.get('x-request-id') ?? undefined;
  let body: { error?: { code?: unknown; message?: unknown; details?: unknown; request_id?: unknown } } = {};
  try {
    body = (await res.json()) as typeof body;
  } catch {
    // Not JSON.
  }
  const e = body.error;
  const retryAfter = Number(res.headers.get('retry-after'));
  return createPlatformError({
    code: typeof e?.code === 'string' ? e.code : codeForStatus(res.status),
    message:
      typeof e?.message === 'string' ? e.message : `Unexpected response from the API (HTTP ${res.status})`,
    status: res.status,
    details: Array.isArray(e?.details) ? (e.details as ErrorDetail[]) : undefined,
    requestId: typeof e?.request_id === 'string' ? e.request_id : requestId,
    retryAfter: Number.isFinite(retryAfter) && res.headers.has('retry-after') ? retryAfter : undefined,
  });
}

const connectionError = (cause: unknown) =>
  createPlatformError({
    code: 'CONNECTION_ERROR',
    message: `Could not reach the API${cause instanceof Error && cause.message ? `: ${cause.message}` : ''}`,
    status: 0,
    cause,
  });

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });

/**
 * Follows `GET /v1/hosting/sites/{siteId}/deployments/{deploymentId}/logs` as Server-Sent Events. Errors of the
 * request (404, 403, ...) reject the iteration with their {@link PlatformApiError} subclass; an expired access
 * token is refreshed as for every other call.
 */
export function followDeploymentLogs(
  transport: LogFollowerTransport,
  siteId: string,
  deploymentId: string,
  options: FollowLogsOptions = {},
): DeploymentLogStream {
  const url =
    `${transport.restBase}/hosting/sites/${encodeURIComponent(siteId)}` +
    `/deployments/${encodeURIComponent(deploymentId)}/logs`;
  const maxReconnects = options.maxReconnects ?? 5;
  const firstDelay = options.reconnectDelayMs ?? 500;
  let status: DeploymentStatus | undefined;

  async function open(after: number): Promise<Response> {
    return transport.authorized(async (token) => {
      let res: Response;
      try {
        res = await transport.fetch(`${url}?after=${after}`, {
          method: 'GET',
          headers: {
            accept: 'text/event-stream',
            ...(token ? { authorization: `Bearer ${token}` } : {}),
            ...(after > 0 ? { 'last-event-id': String(after) } : {}),
          },
          ...(options.signal ? { signal: options.signal } : {}),
        });
      } catch (err) {
        throw connectionError(err);
      }
      if (!res.ok || !/^text\/event-stream/i.test(res.headers.get('content-type') ?? '')) {
        throw await errorFrom(res);
      }
      return res;
    });
  }

  async function* lines(): AsyncGenerator<BuildLogLine> {
    let last = options.after ?? 0;
    let failures = 0;
    for (;;) {
      if (options.signal?.aborted) return;
      let res: Response | undefined;
      try {
        res = await open(last);
        for await (const e of parseEventStream(res.body!)) {
          if (e.event === 'log') {
            const line = JSON.parse(e.data) as BuildLogLine;
            if (line.seq <= last) continue;
            last = line.seq;
            failures = 0;
            yield line;
          } else if (e.event === 'end') {
            status = (JSON.parse(e.data) as { status: DeploymentStatus }).status;
            return;
          }
        }
      } catch (err) {
        if (options.signal?.aborted) return;
        // Errors the API answered are final; a broken connection is tried again.
        const error = err as PlatformApiError;
        if (error.status !== 0 && res === undefined) throw err;
        if (failures >= maxReconnects) throw error.status === 0 ? err : connectionError(err);
      }
      if (options.signal?.aborted) return;
      // The stream ended without `end` (the server restarted, a proxy cut it): pick up where it stopped.
      if (failures >= maxReconnects)
        throw connectionError(new Error('the log stream ended before the build did'));
      await sleep(firstDelay * 2 ** failures, options.signal);
      failures++;
    }
  }

  return {
    get status() {
      return status;
    },
    [Symbol.asyncIterator]: () => lines(),
  };
}
