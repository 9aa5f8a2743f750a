import { WakeSignal } from '../../lib/wake-signal.js';
import type { AppDeps } from '../../kit/deps.js';
import {
  closeWebhookHttpClient,
  performAttempt,
  recordOutcomes,
  type AttemptTarget,
  type OutcomeInput,
  type RecordedOutcome,
} from './delivery-attempt.js';

/*
 * Why the deliveries table is its own queue rather than a pg-boss queue:
 * a delivery already is a durable row with a due time and a state. Claiming due rows with
 * `UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT n)` takes a whole batch in one statement, bumps
 * `attempts` and sets a lease (`next_attempt_at` moved past the attempt's timeout) atomically, and outcomes are
 * written back to the same rows, many per guarded UPDATE. A pg-boss job per attempt would add a second durable
 * record to keep in step with the row (insert, fetch, complete: more writes per attempt, each on its own) for no
 * gain in safety, and nothing here takes a process-wide lock. Two processes never claim the same attempt: a locked row is skipped, a claimed
 * row is no longer due until its lease expires (only if its process died mid-attempt), and a stale worker's
 * result is refused by the `attempts` guard.
 */

/** Outcomes written per statement at most. */
const OUTCOME_BATCH = 200;

export interface DeliveryWorkerOptions {
  /** Attempts in flight at once in this process. */
  concurrency?: number;
  /** Rows claimed per statement at most. */
  claimBatch?: number;
  /** Longest sleep when idle (due retries and other processes' deliveries are found by polling). */
  pollIntervalMs?: number;
}

interface ClaimedRow {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  payload: string;
  attempts: number;
  url: string;
  secret: string;
}

export class DeliveryWorker {
  private readonly concurrency: number;
  private readonly claimBatch: number;
  private readonly pollIntervalMs: number;
  /** Claimed deliveries stay unclaimable this long: the attempt's timeout plus room to record its outcome. */
  private readonly leaseMs: number;
  private running = false;
  private inFlight = 0;
  private readonly inFlightDone = new Set<Promise<void>>();
  private loopDone: Promise<void> | undefined;
  private readonly signal = new WakeSignal();
  private readonly outcomes: { item: OutcomeInput; resolve: (r: RecordedOutcome | undefined) => void }[] = [];
  private writing: Promise<void> | undefined;
  /** Attempts this process has made (for tests and metrics). */
  attemptsMade = 0;

  constructor(
    private readonly deps: AppDeps,
    opts: DeliveryWorkerOptions = {},
  ) {
    this.concurrency = opts.concurrency ?? 64;
    this.claimBatch = opts.claimBatch ?? 100;
    this.pollIntervalMs = opts.pollIntervalMs ?? 1000;
    this.leaseMs = deps.config.webhook.timeoutMs + 60_000;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop();
  }

  /**
   * Stops claiming, then waits for the attempts in flight (each bounded by the timeout) to be recorded, and closes
   * the process's outbound client.
   */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.nudge();
    await this.loopDone;
    await Promise.all([...this.inFlightDone]);
    closeWebhookHttpClient(this.deps);
  }

  nudge(): void {
    this.signal.nudge();
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (this.running) {
      this.signal.reset();
      const free = this.concurrency - this.inFlight;
      let claimed = 0;
      let wanted = 0;
      let nextDueMs: number | undefined;
      try {
        if (free > 0) {
          wanted = Math.min(free, this.claimBatch);
          const rows = await this.claim(wanted);
          claimed = rows.length;
          for (const row of rows) this.launch(row);
          if (claimed < wanted) {
            await this.failDeliveriesOfInactiveWebhooks();
            nextDueMs = await this.msUntilNextDue();
          }
        }
        failures = 0;
      } catch (err) {
        failures++;
        this.deps.log.error({ err }, 'webhook delivery worker failed; retrying');
      }
      if (!this.running) break;
      if (failures > 0) {
        await this.signal.sleep(Math.min(30_000, 500 * 2 ** Math.min(failures, 6)));
      } else if (free <= 0) {
        await this.signal.sleep(this.pollIntervalMs); // woken as soon as an attempt finishes
      } else if (claimed < wanted) {
        await this.signal.sleep(Math.max(0, Math.min(this.pollIntervalMs, nextDueMs ?? this.pollIntervalMs)));
      }
    }
  }

  private launch(row: ClaimedRow): void {
    const target: AttemptTarget = {
      deliveryId: row.id,
      webhookId: row.webhook_id,
      eventId: row.event_id,
      eventType: row.event_type,
      payload: row.payload,
      attempt: Number(row.attempts),
      url: row.url,
      secret: row.secret,
    };
    this.inFlight++;
    this.attemptsMade++;
    const done = this.attempt(target).finally(() => {
      this.inFlight--;
      this.inFlightDone.delete(done);
      // A full pool claims again once half of it is free, not after every single attempt.
      if (this.inFlight <= this.concurrency / 2) this.nudge();
    });
    this.inFlightDone.add(done);
  }

  private async attempt(target: AttemptTarget): Promise<void> {
    const outcome = await performAttempt(this.deps, target);
    const result = await this.record({ target, outcome });
    if (!result) return; // not written: the lease expires and the delivery is attempted again (never lost)
    if (!result.recorded) {
      this.deps.log.warn({ deliveryId: target.deliveryId }, 'delivery outcome not recorded: lease expired');
    } else if (result.status === 'pending') {
      // A retry may be due before the loop's next planned look.
      this.nudge();
    }
  }

  /**
   * Outcomes are written in batches: those that finish while a write runs go together in the next statement, so
   * the number of writes follows the database's pace rather than one per attempt.
   */
  private record(item: OutcomeInput): Promise<RecordedOutcome | undefined> {
    return new Promise((resolve) => {
      this.outcomes.push({ item, resolve });
      this.writing ??= this.writeOutcomes();
    });
  }

  private async writeOutcomes(): Promise<void> {
    await Promise.resolve(); // let the outcomes of the same tick join the first batch
    while (this.outcomes.length > 0) {
      const batch = this.outcomes.splice(0, OUTCOME_BATCH);
      try {
        const results = await recordOutcomes(
          this.deps,
          this.deps.db.orm.em.fork(),
          batch.map((b) => b.item),
        );
        batch.forEach((b, k) => b.resolve(results[k]));
      } catch (err) {
        this.deps.log.error({ err, count: batch.length }, 'could not record delivery outcomes');
        for (const b of batch) b.resolve(undefined);
      }
    }
    this.writing = undefined;
  }

  /** Claims up to `limit` due deliveries of active webhooks, in one statement. */
  private async claim(limit: number): Promise<ClaimedRow[]> {
    const now = this.deps.clock.now();
    const leaseUntil = new Date(now.getTime() + this.leaseMs);
    const em = this.deps.db.orm.em.fork();
    return em.execute<ClaimedRow[]>(
      `update "webhook_deliveries" d
          set "attempts" = d."attempts" + 1, "next_attempt_at" = ?, "updated_at" = ?
         from "webhooks" w
        where w."id" = d."webhook_id"
          and d."id" in (
            select q."id" from "webhook_deliveries" q
              join "webhooks" qw on qw."id" = q."webhook_id" and qw."status" = 'active'
             where q."status" = 'pending' and q."next_attempt_at" <= ?
             order by q."next_attempt_at"
             limit ?
             for update of q skip locked)
      returning d."id", d."webhook_id", d."event_id", d."event_type", d."payload", d."attempts", w."url", w."secret"`,
      [leaseUntil, now, now, limit],
    );
  }

  /** Deliveries whose webhook was paused, disabled (410) or deleted meanwhile end as `failed`, unattempted. */
  private async failDeliveriesOfInactiveWebhooks(): Promise<void> {
    const now = this.deps.clock.now();
    await this.deps.db.orm.em.fork().execute(
      `update "webhook_deliveries" d
          set "status" = 'failed', "next_attempt_at" = null, "updated_at" = ?,
              "last_error" = 'Not attempted: the webhook is no longer active'
         from "webhooks" w
        where w."id" = d."webhook_id" and w."status" <> 'active'
          and d."status" = 'pending' and d."next_attempt_at" <= ?`,
      [now, now],
    );
  }

  private async msUntilNextDue(): Promise<number | undefined> {
    const rows = await this.deps.db.orm.em
      .fork()
      .execute<{ next: Date | string | null }[]>(
        `select min("next_attempt_at") as "next" from "webhook_deliveries" where "status" = 'pending'`,
      );
    const next = rows[0]?.next;
    if (!next) return undefined;
    return new Date(next).getTime() - this.deps.clock.now().getTime();
  }
}
