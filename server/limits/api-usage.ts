import type { Logger } from 'pino';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { Database, Em } from '../db/orm.js';
import { AppError } from '../lib/errors.js';
import { planLimit, type PlanId } from '../lib/plans.js';
import type { Clock } from '../lib/time.js';
import type { QuotaTicket, SharedLimits } from './shared-limits.js';

/** Burst window (docs/api-conventions.md, "Rate limits and quotas"): `RATE_LIMIT_BURST` requests per this many seconds, per login session. */
export const BURST_WINDOW_SECONDS = 10;
/** Counters are written to `api_calls_daily` this often (and at shutdown), never once per request. */
export const USAGE_FLUSH_INTERVAL_MS = 5_000;
/** How stale an organization's monthly total read from the database may get (other processes count too). */
const QUOTA_RELOAD_MS = 30_000;
/** An organization's cached monthly total is dropped after this long without a request. */
const QUOTA_IDLE_MS = 10 * 60_000;
/** Rows per upsert statement. */
const WRITE_CHUNK = 500;
/** `last_used_at` of an API key is written at most this often. */
export const KEY_USE_RESOLUTION_MS = 60_000;

/** The burst budget after one request, for the `RateLimit-Policy` and `RateLimit` headers. */
export interface BurstState {
  /** False when the budget was already spent: answer 429 RATE_LIMITED. */
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets (≥ 1). */
  resetSeconds: number;
  /** With Redis: what counting the request against the monthly quota gave, in the same round trip (admit). */
  quota?: QuotaTicket;
}

export function rateLimitedError(b: BurstState): AppError {
  return new AppError(
    'RATE_LIMITED',
    `Rate limit of ${b.limit} requests per ${BURST_WINDOW_SECONDS} seconds exceeded; retry after ${b.resetSeconds} s`,
    { retryAfter: b.resetSeconds },
  );
}

/** `RateLimit-Policy` and `RateLimit` in the structured-field form of the IETF httpapi ratelimit-headers draft. */
export function rateLimitHeaders(b: BurstState): Record<string, string> {
  return {
    'RateLimit-Policy': `"burst";q=${b.limit};w=${BURST_WINDOW_SECONDS}`,
    RateLimit: `"burst";r=${b.remaining};t=${b.resetSeconds}`,
  };
}

interface DayCount {
  organizationId: string;
  userId: string;
  day: string;
  calls: number;
  limited: number;
}

interface OrgMonth {
  month: string;
  /** The organization's calls this month as last read from the database, plus local calls flushed since. */
  stored: number;
  /** Local calls of this month not yet flushed. */
  unflushed: number;
  loadedAt: number;
  usedAt: number;
}

interface OutageCalls {
  month: string;
  calls: number;
}

const utcDay = (d: Date) => d.toISOString().slice(0, 10);
const utcMonth = (d: Date) => d.toISOString().slice(0, 7);
const monthStartDay = (d: Date) => `${utcMonth(d)}-01`;
function nextMonthStart(d: Date): Date {
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
}

function quotaExceeded(plan: PlanId, limit: number, now: Date): AppError {
  const retryAfter = Math.max(1, Math.ceil((nextMonthStart(now).getTime() - now.getTime()) / 1000));
  return new AppError(
    'QUOTA_EXCEEDED',
    `Monthly API quota of the ${plan} plan (${limit} calls) is used up until the period ends: upgrade the plan ` +
      'with PUT /v1/billing/subscription, or wait for the next period (Retry-After)',
    { retryAfter },
  );
}

/** In-memory counters of each process, found from any EntityManager of its database (see apiCallsSince). */
const registry = new WeakMap<object, ApiUsage>();

/**
 * API calls per organization, user and UTC day (billing usage, `activity.api_calls_30d`), the monthly quota of the
 * plan, and the per-session burst limit (docs/api-conventions.md, "Rate limits and quotas").
 *
 * Requests only touch memory: counters are flushed with one upsert every few seconds and at shutdown. The monthly
 * total of an organization is read from the database on its first request and every 30 s after, so that several
 * processes sharing a database converge on the same total; between reads a process may overshoot the quota by what
 * the others counted meanwhile.
 *
 * With `REDIS_URL` (docs/deploying.md), the burst windows and the monthly totals live in Redis instead (SharedLimits),
 * exact across processes, in one round trip per request; the daily counters are still written to the database, which
 * stays the billing record. While Redis cannot be reached, each process falls back to the in-memory limits above,
 * and the calls it admits meanwhile are added to the Redis total when it is back.
 */
export class ApiUsage {
  private pending = new Map<string, DayCount>();
  /** API keys used since the last flush whose `last_used_at` is due (docs/api-keys.md, "API keys"): key id → time of use. */
  private keyUses = new Map<string, Date>();
  private readonly orgs = new Map<string, OrgMonth>();
  private readonly loading = new Map<string, Promise<OrgMonth>>();
  private readonly burst: RateLimiterMemory;
  /** Calls admitted by this process while Redis could not be reached, per organization, not yet added there. */
  private readonly outage = new Map<string, OutageCalls>();
  /** Database reads of a month's total for a Redis counter being seeded, shared by concurrent requests. */
  private readonly seeding = new Map<string, Promise<number>>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly log: Logger,
    readonly burstLimit: number,
    /** The limits shared through Redis (REDIS_URL); undefined: this process's own. */
    readonly shared?: SharedLimits,
  ) {
    // rate-limiter-flexible's memory store: a fixed 10 s window per key with expiring records.
    this.burst = new RateLimiterMemory({ points: burstLimit, duration: BURST_WINDOW_SECONDS });
    registry.set(db.orm.em.getDriver(), this);
  }

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), USAGE_FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  /** Stops the timer and writes what is still counted in memory. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  /**
   * Takes one request from the burst budget of a login session. A refused request (`allowed: false`) is counted as a
   * rate-limit hit of its organization.
   */
  async consumeBurst(sessionId: string, organizationId: string, userId: string): Promise<BurstState> {
    if (this.shared) {
      const month = utcMonth(this.clock.now());
      const r = await this.shared.consume(
        sessionId,
        organizationId,
        month,
        this.outageCalls(organizationId, month),
      );
      if (!r.allowed) this.count(organizationId, userId, 0, 1);
      return { ...this.burstState(r.res, r.allowed), quota: r.quota };
    }
    try {
      return this.burstState(await this.burst.consume(sessionId), true);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      this.count(organizationId, userId, 0, 1);
      return this.burstState(err, false);
    }
  }

  private burstState(res: RateLimiterRes, allowed: boolean): BurstState {
    return {
      allowed,
      limit: this.burstLimit,
      remaining: res.remainingPoints,
      resetSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
    };
  }

  /**
   * Counts one authenticated request against the monthly quota of the organization's plan. Throws QUOTA_EXCEEDED
   * (Retry-After: until the calendar month ends, UTC) when the quota is used up; refused requests do not count.
   * `burst` is what consumeBurst answered for the same request (with Redis, it already counted the call there).
   */
  async admit(organizationId: string, userId: string, plan: PlanId, burst?: BurstState): Promise<void> {
    const limit = planLimit(plan, 'api_calls');
    const now = this.clock.now();
    if (this.shared) {
      const month = utcMonth(now);
      const ticket: QuotaTicket =
        burst?.quota?.organizationId === organizationId && burst.quota.month === month
          ? burst.quota
          : { kind: 'skipped', organizationId, month };
      // Counted for another organization or month (the token's, or the month turned over meanwhile): given back.
      if (burst?.quota && ticket !== burst.quota) this.release(burst);
      const used = await this.sharedCount(ticket, limit, now);
      if (typeof used === 'number') {
        if (used > limit) {
          // The counter holds admitted calls only: take this one back.
          void this.shared.uncount(organizationId, month);
          this.count(organizationId, userId, 0, 1);
          throw quotaExceeded(plan, limit, now);
        }
        this.recordApiCall(organizationId, userId);
        return;
      }
      // Redis could not be reached: this process's own count decides, and Redis gets the call when it is back,
      // unless a command that may have counted it there went out (timed out, or the connection dropped under it).
      await this.admitLocally(organizationId, userId, plan, limit, now);
      if (used === 'unsent') this.noteOutageCall(organizationId, month);
      return;
    }
    await this.admitLocally(organizationId, userId, plan, limit, now);
  }

  /**
   * The request was refused after consumeBurst, before admit (its session was revoked, its user removed): with
   * Redis, the call the burst step counted toward the monthly quota is taken back.
   */
  release(burst: BurstState): void {
    const q = burst.quota;
    if (!this.shared || q?.kind !== 'counted') return;
    this.settleOutageCalls(q.organizationId, q.month, q.extra);
    void this.shared.uncount(q.organizationId, q.month);
  }

  private async admitLocally(
    organizationId: string,
    userId: string,
    plan: PlanId,
    limit: number,
    now: Date,
  ): Promise<void> {
    if (limit === Number.POSITIVE_INFINITY) {
      this.recordApiCall(organizationId, userId);
      return;
    }
    const state = await this.orgMonth(organizationId, now);
    if (state.stored + state.unflushed >= limit) {
      this.count(organizationId, userId, 0, 1);
      throw quotaExceeded(plan, limit, now);
    }
    this.recordApiCall(organizationId, userId);
  }

  /**
   * The organization's calls this month in Redis, this one included (counted now if the ticket did not); when Redis
   * could not count it, whether the command certainly never went out (`unsent`) or may have counted it (`unknown`).
   */
  private async sharedCount(
    ticket: QuotaTicket,
    limit: number,
    now: Date,
  ): Promise<number | 'unsent' | 'unknown'> {
    const shared = this.shared!;
    const { organizationId, month } = ticket;
    if (ticket.kind === 'failed') return ticket.sent ? 'unknown' : 'unsent';
    if (!shared.connected && ticket.kind !== 'counted') return 'unsent';
    try {
      switch (ticket.kind) {
        case 'counted':
          this.settleOutageCalls(organizationId, month, ticket.extra);
          return ticket.used;
        case 'skipped': {
          const extra = this.outageCalls(organizationId, month);
          const used = await shared.count(organizationId, month, extra);
          if (used !== undefined) {
            this.settleOutageCalls(organizationId, month, extra);
            return used;
          }
          break;
        }
        case 'missing':
          break;
      }
      // No counter yet this month (or Redis lost it). Unlimited plans need none; others start from the database.
      if (limit === Number.POSITIVE_INFINITY) {
        this.outage.delete(organizationId);
        return 0;
      }
      const seed = await this.monthTotalForSeed(organizationId, now);
      const extra = this.outageCalls(organizationId, month);
      const ttlSeconds = Math.ceil((nextMonthStart(now).getTime() - now.getTime()) / 1000) + 86_400;
      const used = await shared.seedAndCount(organizationId, month, seed, extra, ttlSeconds);
      this.settleOutageCalls(organizationId, month, extra);
      return used;
    } catch {
      return 'unknown';
    }
  }

  /** Calls of the month so far as this process knows them: the database's total and its own unflushed calls. */
  private monthTotalForSeed(organizationId: string, now: Date): Promise<number> {
    let reading = this.seeding.get(organizationId);
    if (!reading) {
      reading = this.monthTotalFromDb(organizationId, now)
        .then((stored) => {
          const month = utcMonth(now);
          let unflushed = 0;
          for (const e of this.pending.values()) {
            if (e.organizationId === organizationId && e.day.startsWith(month)) unflushed += e.calls;
          }
          return stored + unflushed;
        })
        .finally(() => this.seeding.delete(organizationId));
      this.seeding.set(organizationId, reading);
    }
    return reading;
  }

  private outageCalls(organizationId: string, month: string): number {
    const entry = this.outage.get(organizationId);
    return entry?.month === month ? entry.calls : 0;
  }

  private noteOutageCall(organizationId: string, month: string): void {
    const entry = this.outage.get(organizationId);
    if (entry?.month === month) entry.calls += 1;
    else this.outage.set(organizationId, { month, calls: 1 });
  }

  /** `sent` outage calls were added to the Redis total. */
  private settleOutageCalls(organizationId: string, month: string, sent: number): void {
    if (sent === 0) return;
    const entry = this.outage.get(organizationId);
    if (entry?.month !== month) return;
    entry.calls -= sent;
    if (entry.calls <= 0) this.outage.delete(organizationId);
  }

  /**
   * Notes that an API key authenticated a request. `last_used_at` is written at most once a minute per key (the
   * update is guarded by the stored value, so several processes agree), with the counters' batched flush: never on
   * the request's critical path. `storedMs` is the stored value the request's own lookup read.
   */
  noteKeyUse(keyId: string, storedMs: number | null, now: Date): void {
    if (storedMs !== null && now.getTime() - storedMs < KEY_USE_RESOLUTION_MS) return;
    if (!this.keyUses.has(keyId)) this.keyUses.set(keyId, now);
  }

  /** Counts one API call (memory only; flushed later). */
  recordApiCall(organizationId: string, userId: string): void {
    this.count(organizationId, userId, 1, 0);
  }

  private count(organizationId: string, userId: string, calls: number, limited: number): void {
    const now = this.clock.now();
    this.addPending({ organizationId, userId, day: utcDay(now), calls, limited });
    const org = this.orgs.get(organizationId);
    if (org && org.month === utcMonth(now)) {
      org.unflushed += calls;
      org.usedAt = now.getTime();
    }
  }

  private addPending(e: DayCount): void {
    const key = `${e.organizationId}|${e.userId}|${e.day}`;
    const entry = this.pending.get(key);
    if (entry) {
      entry.calls += e.calls;
      entry.limited += e.limited;
    } else {
      this.pending.set(key, { ...e });
    }
  }

  private async orgMonth(organizationId: string, now: Date): Promise<OrgMonth> {
    const month = utcMonth(now);
    const cached = this.orgs.get(organizationId);
    if (cached && cached.month === month) return cached;
    let loading = this.loading.get(organizationId);
    if (!loading) {
      loading = (async () => {
        const stored = await this.monthTotalFromDb(organizationId, now);
        const state: OrgMonth = {
          month,
          stored,
          unflushed: 0,
          loadedAt: now.getTime(),
          usedAt: now.getTime(),
        };
        // Calls of this month counted locally but not flushed yet are not in `stored`.
        for (const e of this.pending.values()) {
          if (e.organizationId === organizationId && e.day.startsWith(month)) state.unflushed += e.calls;
        }
        this.orgs.set(organizationId, state);
        return state;
      })().finally(() => this.loading.delete(organizationId));
      this.loading.set(organizationId, loading);
    }
    return loading;
  }

  private async monthTotalFromDb(organizationId: string, now: Date): Promise<number> {
    const rows = await this.db.orm.em
      .fork()
      .execute<{ total: string | number | null }[]>(
        'select sum("count") as total from api_calls_daily where organization_id = ? and day >= ?::date',
        [organizationId, monthStartDay(now)],
      );
    return Number(rows[0]?.total ?? 0);
  }

  /** In-memory (not yet flushed) counts matching a filter; apiCallsSince adds them to the stored ones. */
  unflushedSince(filter: { organizationId: string; userId?: string; sinceDay: string }): {
    calls: number;
    limited: number;
  } {
    let calls = 0;
    let limited = 0;
    for (const e of this.pending.values()) {
      if (e.organizationId !== filter.organizationId || e.day < filter.sinceDay) continue;
      if (filter.userId !== undefined && e.userId !== filter.userId) continue;
      calls += e.calls;
      limited += e.limited;
    }
    return { calls, limited };
  }

  /** Writes the counters with one atomic upsert, then refreshes stale monthly totals. Serialised. */
  flush(): Promise<void> {
    this.flushing = this.flushing
      .then(() => this.flushNow())
      .catch((err: unknown) => {
        this.log.error({ err }, 'could not write API usage counters; will retry');
      });
    return this.flushing;
  }

  private async flushNow(): Promise<void> {
    // Best effort: a failed write of `last_used_at` must not hold back the counters (the next use notes it again).
    await this.flushKeyUses().catch((err: unknown) => {
      this.log.warn({ err }, 'could not write the last use of API keys');
    });
    const batch = [...this.pending.values()];
    this.pending = new Map();
    // What is being written moves from `unflushed` to `stored`, so totals stay exact while it is written.
    this.moveToStored(batch, 1);
    for (let i = 0; i < batch.length; i += WRITE_CHUNK) {
      try {
        await this.write(batch.slice(i, i + WRITE_CHUNK));
      } catch (err) {
        // Chunks already written stay written; the rest is counted again next time.
        const rest = batch.slice(i);
        this.moveToStored(rest, -1);
        for (const e of rest) this.addPending(e);
        throw err;
      }
    }
    // Only here (nothing of ours is being written) can a fresh total replace `stored` without double counting.
    const now = this.clock.now();
    for (const [orgId, entry] of this.outage) if (entry.month !== utcMonth(now)) this.outage.delete(orgId);
    for (const [orgId, state] of this.orgs) {
      if (now.getTime() - state.usedAt > QUOTA_IDLE_MS || utcMonth(now) !== state.month) {
        this.orgs.delete(orgId);
      } else if (now.getTime() - state.loadedAt >= QUOTA_RELOAD_MS) {
        state.stored = await this.monthTotalFromDb(orgId, now);
        state.loadedAt = now.getTime();
      }
    }
  }

  private async flushKeyUses(): Promise<void> {
    if (this.keyUses.size === 0) return;
    const uses = [...this.keyUses];
    this.keyUses = new Map();
    for (let i = 0; i < uses.length; i += WRITE_CHUNK) {
      const part = uses.slice(i, i + WRITE_CHUNK);
      await this.db.orm.em.fork().execute(
        `update "api_keys" k set "last_used_at" = v.at::timestamptz
           from (values ${part.map(() => '(?, ?)').join(', ')}) as v(id, at)
          where k."id" = v.id
            and (k."last_used_at" is null or k."last_used_at" <= v.at::timestamptz - interval '1 minute')`,
        part.flatMap(([id, at]) => [id, at.toISOString()]),
      );
    }
  }

  private moveToStored(entries: DayCount[], sign: 1 | -1): void {
    for (const e of entries) {
      const state = this.orgs.get(e.organizationId);
      if (!state || !e.day.startsWith(state.month)) continue;
      state.unflushed -= sign * e.calls;
      state.stored += sign * e.calls;
    }
  }

  /** One atomic upsert: concurrent processes add to the same rows without losing counts. */
  private async write(part: DayCount[]): Promise<void> {
    const values = part.map(() => '(?::varchar, ?::varchar, ?::date, ?::int, ?::int)').join(', ');
    const params = part.flatMap((e) => [e.organizationId, e.userId, e.day, e.calls, e.limited]);
    // Not for an organization being deleted: its rows are being removed (docs/organization.md, "The organization").
    await this.db.orm.em.fork().execute(
      `insert into api_calls_daily (organization_id, user_id, day, "count", rate_limited)
       select * from (values ${values}) as v (organization_id, user_id, day, "count", rate_limited)
        where not exists (select 1 from organizations o where o.id = v.organization_id and o.deleted_at is not null)
       on conflict (organization_id, day, user_id) do update set
         "count" = api_calls_daily."count" + excluded."count",
         rate_limited = api_calls_daily.rate_limited + excluded.rate_limited`,
      params,
    );
  }
}

/**
 * API usage of an organization (or one of its users) from the UTC day of `since` on: stored counters plus those
 * still in memory. `calls` are the requests served; `rateLimited` the ones refused with 429.
 */
export async function apiUsageSince(
  em: Em,
  filter: { organizationId: string; userId?: string; since: Date },
): Promise<{ calls: number; rateLimited: number }> {
  const sinceDay = utcDay(filter.since);
  const params: unknown[] = [filter.organizationId, sinceDay];
  let sql =
    'select coalesce(sum("count"), 0) as calls, coalesce(sum(rate_limited), 0) as limited from api_calls_daily where organization_id = ? and day >= ?::date';
  if (filter.userId !== undefined) {
    sql += ' and user_id = ?';
    params.push(filter.userId);
  }
  const rows = await em.execute<{ calls: string | number; limited: string | number }[]>(sql, params);
  const local = registry.get(em.getDriver())?.unflushedSince({
    organizationId: filter.organizationId,
    userId: filter.userId,
    sinceDay,
  }) ?? { calls: 0, limited: 0 };
  return {
    calls: Number(rows[0]?.calls ?? 0) + local.calls,
    rateLimited: Number(rows[0]?.limited ?? 0) + local.limited,
  };
}

/** API calls of an organization (or one user) from the UTC day of `since` on (users' `activity.api_calls_30d`). */
export async function apiCallsSince(
  em: Em,
  filter: { organizationId: string; userId?: string; since: Date },
): Promise<number> {
  return (await apiUsageSince(em, filter)).calls;
}
