import type { Redis, RedisOptions } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Logger } from 'pino';

/**
 * The burst limit and the monthly quota counters in Redis, shared by every process that has the same `REDIS_URL`
 * and `REDIS_KEY_PREFIX` (docs/api-conventions.md, "Rate limits and quotas"; docs/deploying.md).
 *
 * - Burst: rate-limiter-flexible's Redis store (a fixed window per login or key, one atomic script), with the
 *   in-process memory store as its insurance limiter while Redis cannot be reached.
 * - Quota: one counter per organization and calendar month (UTC), incremented atomically. It is seeded from
 *   `api_calls_daily` (the billing record, still written by every process) when missing: at the first counted call of
 *   a month, or after Redis lost its data.
 *
 * A request costs one round trip: the burst script and the quota script are written together, before either answer
 * is read. The quota script only counts the call when the burst key says it was within the limit (it runs right
 * after the burst script on the same connection); in the rare case where another process's request came in between
 * and pushed the key over, it counts nothing and the caller counts again once it knows its own burst answer.
 */

/** How long a command may take before the request falls back to this process's limits. */
const COMMAND_TIMEOUT_MS = 1_000;
/** How long one connection attempt may take. */
const CONNECT_TIMEOUT_MS = 2_000;
/** Reconnection delays grow by this step up to the maximum, then stay there for as long as Redis is away. */
const RECONNECT_STEP_MS = 200;
const RECONNECT_MAX_MS = 2_000;
/** At start, how long to wait for the first connection before serving with this process's limits. */
const FIRST_CONNECT_WAIT_MS = 2_000;

/** Quota script results that are not a count. */
const QUOTA_MISSING = -1;
const QUOTA_SKIPPED = -2;

/**
 * KEYS: quota counter, burst key. ARGV: burst limit, extra calls to add (counted while Redis was away).
 * → the count after this call; -2 when the burst key is over its limit (this call's burst answer is not known here:
 * nothing counted); -1 when the counter is missing (nothing counted: seed it first).
 */
const QUOTA_AFTER_BURST = `
local burst = tonumber(redis.call('get', KEYS[2]) or '0')
if burst > tonumber(ARGV[1]) then return ${QUOTA_SKIPPED} end
if redis.call('exists', KEYS[1]) == 0 then return ${QUOTA_MISSING} end
return redis.call('incrby', KEYS[1], 1 + tonumber(ARGV[2]))
`;

/** KEYS: quota counter. ARGV: extra calls. → the count after this call, or -1 when the counter is missing. */
const QUOTA_COUNT = `
if redis.call('exists', KEYS[1]) == 0 then return ${QUOTA_MISSING} end
return redis.call('incrby', KEYS[1], 1 + tonumber(ARGV[1]))
`;

/**
 * KEYS: quota counter. ARGV: the seed (calls of the month so far), extra calls, TTL in seconds. Sets the counter
 * unless another process did first (whose seed did not include this process's extra calls), then counts this call.
 */
const QUOTA_SEED = `
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[3]) then
  return redis.call('incrby', KEYS[1], 1)
end
return redis.call('incrby', KEYS[1], 1 + tonumber(ARGV[2]))
`;

/** KEYS: quota counter. Takes back a refused call; never creates the counter. */
const QUOTA_UNCOUNT = `
if redis.call('exists', KEYS[1]) == 0 then return ${QUOTA_MISSING} end
return redis.call('decr', KEYS[1])
`;

interface LimitCommands {
  apiQuotaAfterBurst(quotaKey: string, burstKey: string, burstLimit: number, extra: number): Promise<number>;
  apiQuotaCount(quotaKey: string, extra: number): Promise<number>;
  apiQuotaSeed(quotaKey: string, seed: number, extra: number, ttlSeconds: number): Promise<number>;
  apiQuotaUncount(quotaKey: string): Promise<number>;
}

/** What the quota script said about one request (see QUOTA_AFTER_BURST). */
export type QuotaTicket =
  | { kind: 'counted'; organizationId: string; month: string; used: number; extra: number }
  | { kind: 'missing' | 'skipped'; organizationId: string; month: string }
  /**
   * Redis could not count it. `sent`: the command went out (it timed out or the connection dropped), so it may have
   * been counted after all; otherwise it certainly was not.
   */
  | { kind: 'failed'; organizationId: string; month: string; sent: boolean };

export interface SharedBurst {
  res: RateLimiterRes;
  allowed: boolean;
  quota: QuotaTicket;
}

/** The memory store that answers while Redis cannot: it tells its owner each time it is used. */
class FallbackMemoryLimiter extends RateLimiterMemory {
  constructor(
    opts: { points: number; duration: number },
    private readonly onUse: () => void,
  ) {
    super(opts);
  }

  override consume(
    key: string | number,
    pointsToConsume?: number,
    options?: { [key: string]: unknown },
  ): Promise<RateLimiterRes> {
    this.onUse();
    return super.consume(key, pointsToConsume, options);
  }
}

export interface SharedLimitsOptions {
  url: string;
  keyPrefix: string;
  burstLimit: number;
  burstWindowSeconds: number;
  log: Logger;
}

/** Whether the process currently shares its limits through Redis (`/readyz` says it). */
export type SharedLimitsState = 'connected' | 'unreachable';

export class SharedLimits {
  readonly burst: RateLimiterRedis;
  private readonly commands: LimitCommands;
  /** Undefined until the first connection or failure; each change is logged once. */
  private reachable: boolean | undefined;
  private closing = false;

  private constructor(
    private readonly client: Redis,
    private readonly opts: SharedLimitsOptions,
  ) {
    const fallback = new FallbackMemoryLimiter(
      { points: opts.burstLimit, duration: opts.burstWindowSeconds },
      () => this.setReachable(false, 'a burst limit command failed'),
    );
    this.burst = new RateLimiterRedis({
      storeClient: client,
      keyPrefix: `${opts.keyPrefix}burst`,
      points: opts.burstLimit,
      duration: opts.burstWindowSeconds,
      // Not connected: straight to the insurance limiter rather than waiting for a command to fail.
      rejectIfRedisNotReady: true,
      insuranceLimiter: fallback,
    });
    client.defineCommand('apiQuotaAfterBurst', { numberOfKeys: 2, lua: QUOTA_AFTER_BURST });
    client.defineCommand('apiQuotaCount', { numberOfKeys: 1, lua: QUOTA_COUNT });
    client.defineCommand('apiQuotaSeed', { numberOfKeys: 1, lua: QUOTA_SEED });
    client.defineCommand('apiQuotaUncount', { numberOfKeys: 1, lua: QUOTA_UNCOUNT });
    this.commands = client as unknown as LimitCommands;
    // Connection problems are reported here, never thrown: an 'error' without a listener would end the process.
    client.on('error', (err: Error) => this.setReachable(false, err.message));
    client.on('close', () => this.setReachable(false, 'connection closed'));
    client.on('ready', () => this.setReachable(true));
  }

  /**
   * Connects (ioredis is loaded only here, so a server without REDIS_URL never loads it) and waits briefly for the
   * first connection; if Redis cannot be reached yet, the process starts with its own limits and keeps trying.
   */
  static async connect(opts: SharedLimitsOptions): Promise<SharedLimits> {
    const { Redis } = await import('ioredis');
    const options: RedisOptions = {
      // Commands fail at once while disconnected (the insurance limiter answers) instead of queueing.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectTimeout: CONNECT_TIMEOUT_MS,
      retryStrategy: (times) => Math.min(times * RECONNECT_STEP_MS, RECONNECT_MAX_MS),
      connectionName: 'api-limits',
    };
    const client = new Redis(opts.url, options);
    const limits = new SharedLimits(client, opts);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, FIRST_CONNECT_WAIT_MS);
      client.once('ready', done);
      client.once('error', done);
      function done() {
        clearTimeout(timer);
        client.off('ready', done);
        client.off('error', done);
        resolve();
      }
    });
    return limits;
  }

  /**
   * Another fixed-window limiter in the same Redis (the per-address limits of the unauthenticated endpoints,
   * server/limits/auth-endpoint-limits.ts), with the memory store as its insurance while Redis cannot be reached.
   */
  limiter(name: string, points: number, durationSeconds: number): RateLimiterRedis {
    return new RateLimiterRedis({
      storeClient: this.client,
      keyPrefix: `${this.opts.keyPrefix}${name}`,
      points,
      duration: durationSeconds,
      rejectIfRedisNotReady: true,
      insuranceLimiter: new FallbackMemoryLimiter({ points, duration: durationSeconds }, () =>
        this.setReachable(false, `a ${name} limit command failed`),
      ),
    });
  }

  get state(): SharedLimitsState {
    return this.reachable === true && this.client.status === 'ready' ? 'connected' : 'unreachable';
  }

  /** `/readyz`: one PING (bounded by the command timeout), so that a Redis that hangs is noticed without traffic. */
  async check(): Promise<SharedLimitsState> {
    if (this.client.status === 'ready') {
      try {
        await this.client.ping();
        this.setReachable(true);
      } catch (err) {
        this.setReachable(false, (err as Error).message);
      }
    }
    return this.state;
  }

  private setReachable(reachable: boolean, reason?: string): void {
    if (this.closing || this.reachable === reachable) return;
    const first = this.reachable === undefined;
    this.reachable = reachable;
    if (!reachable) {
      this.opts.log.warn(
        { reason },
        'Redis is unreachable: burst limits and monthly quotas are counted by each process on its own until it is back',
      );
    } else if (!first) {
      this.opts.log.warn('Redis is reachable again: burst limits and monthly quotas are shared again');
    }
  }

  /** `<prefix>quota:<organization>:<YYYY-MM>`. */
  quotaKey(organizationId: string, month: string): string {
    return `${this.opts.keyPrefix}quota:${organizationId}:${month}`;
  }

  /**
   * Takes one request from the burst budget of `key` and, in the same round trip, counts it against the monthly
   * quota of the organization (when the burst allowed it). `extra` are calls counted while Redis was away.
   */
  async consume(key: string, organizationId: string, month: string, extra: number): Promise<SharedBurst> {
    const connected = this.client.status === 'ready';
    // Both commands are written before either answer is read: one round trip.
    const burst = this.burst.consume(key).then(
      (res) => ({ res, allowed: true }),
      (err: unknown) => {
        if (err instanceof RateLimiterRes) return { res: err, allowed: false };
        throw err;
      },
    );
    const quota: Promise<QuotaTicket> = !connected
      ? Promise.resolve({ kind: 'failed', organizationId, month, sent: false })
      : this.commands
          .apiQuotaAfterBurst(
            this.quotaKey(organizationId, month),
            this.burst.getKey(key),
            this.opts.burstLimit,
            extra,
          )
          .then(
            (used): QuotaTicket => {
              this.setReachable(true);
              if (used === QUOTA_MISSING) return { kind: 'missing', organizationId, month };
              if (used === QUOTA_SKIPPED) return { kind: 'skipped', organizationId, month };
              return { kind: 'counted', organizationId, month, used, extra };
            },
            (err: unknown): QuotaTicket => {
              this.setReachable(false, (err as Error).message);
              return { kind: 'failed', organizationId, month, sent: true };
            },
          );
    const [b, q] = await Promise.all([burst, quota]);
    if (!b.allowed && q.kind === 'counted') {
      // Only when the window turned over between the two scripts: a refused request is not a call.
      void this.uncount(q.organizationId, q.month);
      return { ...b, quota: { kind: 'skipped', organizationId, month } };
    }
    return { ...b, quota: q };
  }

  /** Whether a command would be written now (a failure while not connected means it was never sent). */
  get connected(): boolean {
    return this.client.status === 'ready';
  }

  /** Counts one call on its own (after a skipped ticket). Undefined when the counter is missing; throws on errors. */
  async count(organizationId: string, month: string, extra: number): Promise<number | undefined> {
    const used = await this.withReachability(
      this.commands.apiQuotaCount(this.quotaKey(organizationId, month), extra),
    );
    return used === QUOTA_MISSING ? undefined : used;
  }

  /** Sets a missing counter to `seed` (calls of the month so far) and counts one call. */
  seedAndCount(
    organizationId: string,
    month: string,
    seed: number,
    extra: number,
    ttlSeconds: number,
  ): Promise<number> {
    return this.withReachability(
      this.commands.apiQuotaSeed(this.quotaKey(organizationId, month), seed, extra, ttlSeconds),
    );
  }

  /** Takes back a call refused by the quota. Best effort: a failure is only logged through the reachability state. */
  async uncount(organizationId: string, month: string): Promise<void> {
    await this.withReachability(this.commands.apiQuotaUncount(this.quotaKey(organizationId, month))).catch(
      () => undefined,
    );
  }

  private async withReachability<T>(command: Promise<T>): Promise<T> {
    try {
      const result = await command;
      this.setReachable(true);
      return result;
    } catch (err) {
      this.setReachable(false, (err as Error).message);
      throw err;
    }
  }

  /** Closes the connection (at shutdown): QUIT, or a plain disconnect when Redis does not answer it in time. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.client.status === 'ready') {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        this.client.quit().catch(() => undefined),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, COMMAND_TIMEOUT_MS);
        }),
      ]);
      clearTimeout(timer);
    }
    this.client.disconnect();
  }
}
