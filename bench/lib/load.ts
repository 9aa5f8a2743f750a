import autocannon from 'autocannon';

export interface LoadOptions {
  url: string;
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers?: Record<string, string>;
  /** Sent as JSON (with Content-Type: application/json) when given. */
  body?: unknown;
  connections: number;
  durationSec: number;
  /** Unmeasured load before the measured one, same connections (0: none). */
  warmupSec?: number;
  /** A header given a value of its own on every request (e.g. `idempotency-key`: a new key each time). */
  uniqueHeader?: string;
}

export interface LoadResult {
  /** Successful (2xx) responses per second over the measured time. */
  rps: number;
  /** Latency percentiles of every response, in milliseconds. */
  p50: number;
  p99: number;
  responses2xx: number;
  non2xx: number;
  /** Connection errors and timeouts. */
  errors: number;
  statusCodes: Record<string, number>;
  durationSec: number;
}

let uniqueSeq = 0;
/** An autocannon request that sets `name` to a value never sent before (the run's prefix and a counter). */
function uniqueHeaderRequest(name: string) {
  const prefix = `${process.pid}-${Date.now().toString(36)}`;
  return {
    setupRequest(req: { headers?: Record<string, string> }) {
      req.headers = { ...req.headers, [name]: `${prefix}-${++uniqueSeq}` };
      return req;
    },
  };
}

/** Runs autocannon in this process against a server in another one. */
export async function measureLoad(opts: LoadOptions): Promise<LoadResult> {
  const headers = { ...opts.headers };
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const result = await autocannon({
    url: opts.url,
    method: opts.method ?? 'GET',
    headers,
    ...(body === undefined ? {} : { body }),
    connections: opts.connections,
    duration: opts.durationSec,
    ...(opts.uniqueHeader ? { requests: [uniqueHeaderRequest(opts.uniqueHeader)] } : {}),
    timeout: 30,
    ...(opts.warmupSec ? { warmup: { connections: opts.connections, duration: opts.warmupSec } } : {}),
  });
  const statusCodes = Object.fromEntries(
    Object.entries(result.statusCodeStats ?? {}).map(([code, s]) => [code, s.count]),
  );
  return {
    rps: result['2xx'] / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    responses2xx: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    statusCodes,
    durationSec: result.duration,
  };
}

/** "1,234 non-2xx responses (429: 1,200, 500: 34)": said next to a figure that only counts successes. */
export function describeFailures(r: LoadResult): string | undefined {
  if (r.non2xx === 0 && r.errors === 0) return undefined;
  const codes = Object.entries(r.statusCodes)
    .filter(([code]) => !code.startsWith('2'))
    .map(([code, n]) => `${code}: ${n}`)
    .join(', ');
  return `${r.non2xx} non-2xx responses${codes ? ` (${codes})` : ''}, ${r.errors} connection errors/timeouts`;
}
