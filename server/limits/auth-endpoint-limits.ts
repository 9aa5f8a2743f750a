import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { AppError } from '../lib/errors.js';
import type { SharedLimits } from './shared-limits.js';

/**
 * Per-address limits of the endpoints anyone may call (login, register, refresh, invitation acceptance, the
 * two-factor step and every other unauthenticated `/auth` mutation): `AUTH_RATE_LIMIT` requests per
 * `AUTH_RATE_LIMIT_WINDOW` from one client address to one endpoint (docs/api-conventions.md, "Rate limits and quotas";
 * docs/security.md). They hold password spraying and bcrypt work to a pace one address cannot turn into a CPU
 * exhaustion, before any password is hashed.
 *
 * The client address is the request's (`TRUST_PROXY` decides whether it is the socket's or the forwarded one, as for
 * everything else). With `REDIS_URL` the windows are shared by every process, like the burst limits; otherwise each
 * process keeps its own.
 */
export class AuthEndpointLimits {
  private readonly limiter: RateLimiterAbstract;

  constructor(
    readonly points: number,
    readonly windowSeconds: number,
    shared?: SharedLimits,
  ) {
    this.limiter = shared
      ? shared.limiter('auth-endpoint:', points, windowSeconds)
      : new RateLimiterMemory({ points, duration: windowSeconds });
  }

  /** Takes one request of `endpoint` from `ip`; throws 429 RATE_LIMITED with `Retry-After` beyond the limit. */
  async consume(endpoint: string, ip: string): Promise<void> {
    try {
      await this.limiter.consume(`${endpoint}:${ip}`);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      const retryAfter = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
      throw new AppError(
        'RATE_LIMITED',
        `Too many requests to this endpoint from this address (${this.points} per ${this.windowSeconds} s); ` +
          `retry after ${retryAfter} s`,
        { retryAfter },
      );
    }
  }
}
