// The part of autocannon 8's programmatic API the bench uses (the package ships no types).
declare module 'autocannon' {
  export interface Options {
    url: string;
    method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
    /** Seconds. */
    duration?: number;
    /** Seconds before a request counts as a timeout. */
    timeout?: number;
    pipelining?: number;
    warmup?: { connections?: number; duration?: number };
    /**
     * Request templates, sent in turn by each connection; `setupRequest` may change each request before it is sent
     * and `onResponse` sees its answer. `context` is an object of the connection's own, kept across its requests.
     */
    requests?: RequestTemplate[];
  }

  export interface RequestTemplate {
    method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
    path?: string;
    headers?: Record<string, string>;
    body?: string;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each caller gives its own request and context types
    setupRequest?: (req: any, context: any) => unknown;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    onResponse?: (status: number, body: string, context: any) => void;
  }

  /** Milliseconds for latency, per-second counts for requests. */
  export interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    p50: number;
    p90: number;
    p97_5: number;
    p99: number;
    total?: number;
  }

  export interface Result {
    /** Seconds actually measured. */
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
    latency: Histogram;
    requests: Histogram & { sent: number };
  }

  export interface Instance extends PromiseLike<Result> {
    stop(): void;
  }

  function autocannon(options: Options): Instance;
  export default autocannon;
}
