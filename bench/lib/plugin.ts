/**
 * How a module adds its own figures to `npm run bench`.
 *
 * Put a file directly in bench/ (for example bench/webhooks.ts) that exports a function named `bench`:
 *
 *     import type { BenchContext } from './lib/plugin.js';
 *
 *     export async function bench(ctx: BenchContext): Promise<void> {
 *       ctx.report.section('Webhooks');
 *       const r = await ctx.load({ method: 'GET', path: '/v1/webhooks' });
 *       ctx.report.figure('GET /webhooks throughput', r.rps, 'req/s', { target: '≥ 1,000 req/s', met: r.rps >= 1000 });
 *     }
 *
 * bench/run.ts finds every such file (all of bench/*.ts but run.ts), in name order, and calls `bench` once, on
 * PostgreSQL, after the core figures, against the same server. `npm run bench -- webhooks` runs only that file
 * (the PostgreSQL server is still started and seeded, the core figures are skipped). Figures are printed, never
 * asserted: pass a target and whether it was met, the run never fails on it. Make your own data through the API
 * (ctx.api), as the organization's owner (ctx.token); stop whatever you start.
 */
import type { LoadResult } from './load.js';
import type { ServerHandle } from './processes.js';
import type { Report } from './report.js';

export interface BenchSettings {
  /** Measured seconds of one load (BENCH_DURATION, default 15). */
  durationSec: number;
  /** Unmeasured seconds before it (BENCH_WARMUP, default 3). */
  warmupSec: number;
  /** Concurrent connections of a load (BENCH_CONNECTIONS, default 50). */
  connections: number;
  /** CPU cores of this machine (the client and the server share them). */
  cores: number;
}

export interface ApiResponse<T> {
  status: number;
  headers: Headers;
  body: T;
}

export interface BenchContext {
  /**
   * The server under test: the built server (as `npm start` runs it) in a child process, NODE_ENV=production,
   * LOG_LEVEL=warn, TRUST_PROXY=true (requests say X-Forwarded-Proto: https), RATE_LIMIT_BURST raised out of the way.
   */
  server: ServerHandle;
  /** The database it runs on. */
  databaseUrl: string;
  /** Access token of the owner of an organization on the enterprise plan (unlimited quota and resources). */
  token: string;
  /** The server's JWT_SECRET, for a hand-written baseline that verifies the same tokens. */
  jwtSecret: string;
  /** Authorization and X-Forwarded-Proto headers for a load or a request of your own. */
  headers: Record<string, string>;
  settings: BenchSettings;
  report: Report;
  /** One JSON request to the server under test; `path` includes /v1. Uses ctx.token unless `token` is given. */
  api<T = unknown>(method: string, path: string, body?: unknown, token?: string): Promise<ApiResponse<T>>;
  /** An autocannon load against the server under test with ctx.headers; defaults from ctx.settings. */
  load(opts: {
    path: string;
    method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
    body?: unknown;
    headers?: Record<string, string>;
    connections?: number;
    durationSec?: number;
    warmupSec?: number;
    /** A header given a new value on every request (`idempotency-key`). */
    uniqueHeader?: string;
  }): Promise<LoadResult>;
  /**
   * Another server on the same database, with the same settings plus `env` (for example NODE_ENV=development and
   * WEBHOOK_ALLOW_PRIVATE_TARGETS=true for a receiver on loopback). Its job workers and those of ctx.server share
   * the queue. Stop it before returning.
   */
  startServer(env?: Record<string, string>): Promise<ServerHandle>;
}

export type BenchPlugin = (ctx: BenchContext) => Promise<void>;
