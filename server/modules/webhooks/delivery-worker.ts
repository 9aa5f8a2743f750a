import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import { WakeSignal } from '../../lib/wake-signal.js';
import type { AppDeps } from '../../kit/deps.js';
import { openWebhookSecret } from './webhook-secrets.js';
import type { ClaimedRow, WebhooksRepository } from './webhooks.repository.js';
import {
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

/*
 * Fairness. Due deliveries are claimed in `fair_at` order rather than by due time. Fan-out and retries set it to the
 * due time; a recovery (`POST /webhooks/:id/recover`) spreads its deliveries over later values (RECOVERY_SPACING_MS
 * apart, after any backlog of the same webhook), so one webhook's thousands of recovered deliveries never stand in
 * front of another webhook's fresh ones, yet are all due at once and go as fast as the pool allows when nothing else
 * waits. And one webhook holds at most three quarters of the process's attempts in flight, so a slow receiver cannot
 * take the whole pool.
 */

/**
 * How long past the attempt's timeout a claimed delivery stays claimed (docs/webhooks.md, "Webhooks"): the request itself is
 * over by the timeout, and this leaves room to record its outcome, so a live process never sees its attempt made a
 * second time elsewhere. A process killed mid-attempt leaves its deliveries due again after the timeout and this
 * margin (25 s with the default `WEBHOOK_TIMEOUT_MS`), when any process's next look takes them.
 */
export const WEBHOOK_LEASE_MARGIN_MS = 15_000;

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

/** Secrets of a rotation made in this process, for the attempts claimed just before it and not yet sent. */
interface RotationNote {
  secret: string;
  previousSecret: string | null;
  replaced: string;
  until: number;
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
  /** Attempts in flight per webhook, and the most one webhook may have. */
  private readonly inFlightByHook = new Map<string, number>();
  private readonly perWebhookLimit: number;
  private readonly rotations = new Map<string, RotationNote>();

  constructor(
    private readonly deps: AppDeps,
    opts: DeliveryWorkerOptions = {},
  ) {
    this.concurrency = opts.concurrency ?? 64;
    this.claimBatch = opts.claimBatch ?? 100;
    this.pollIntervalMs = opts.pollIntervalMs ?? 1000;
    this.leaseMs = deps.config.webhook.timeoutMs + WEBHOOK_LEASE_MARGIN_MS;
    this.perWebhookLimit = Math.max(1, Math.floor((this.concurrency * 3) / 4));
  }

  /**
   * A rotation of `webhookId`'s secret was just written (docs/webhooks.md, "Webhooks"): an attempt claimed before it commits
   * still carries the replaced secret alone and could reach a receiver that has already switched to the new one.
   * Such attempts of this process are signed with both secrets instead (and, if the rotation were rolled back, the
   * extra signature would only be one the receiver ignores).
   */
  noteRotation(webhookId: string, secret: string, previousSecret: string | null, replaced: string): void {
    const now = Date.now();
    for (const [id, note] of this.rotations) if (note.until < now) this.rotations.delete(id);
    this.rotations.set(webhookId, { secret, previousSecret, replaced, until: now + this.leaseMs });
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
    runtimeOf(this.deps, 'webhooks').http.close();
  }

  nudge(): void {
    this.signal.nudge();
  }

  /** The module's data access (webhooks.repository.ts), built by the module's `create` with this worker. */
  private get repository(): WebhooksRepository {
    return repositoryOf(this.deps, 'webhooks');
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
          const { rows, held } = await this.claim(wanted);
          claimed = rows.length;
          for (const row of rows) this.launch(row);
          if (claimed < wanted) {
            await this.failDeliveriesOfInactiveWebhooks();
            nextDueMs = await this.msUntilNextDue();
            // What is due belongs to webhooks at their limit: wait for one of their attempts to finish (a nudge).
            if (held && (nextDueMs === undefined || nextDueMs <= 0)) nextDueMs = this.pollIntervalMs;
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
      // Stored encrypted (webhook-secrets.ts); `noteRotation` and withLatestSecrets compare them in clear.
      secret: openWebhookSecret(this.deps, row.secret),
      previousSecret: row.previous_secret === null ? null : openWebhookSecret(this.deps, row.previous_secret),
    };
    const hook = row.webhook_id;
    this.inFlight++;
    this.inFlightByHook.set(hook, (this.inFlightByHook.get(hook) ?? 0) + 1);
    this.attemptsMade++;
    const done = this.attempt(target).finally(() => {
      this.inFlight--;
      const n = (this.inFlightByHook.get(hook) ?? 1) - 1;
      if (n > 0) this.inFlightByHook.set(hook, n);
      else this.inFlightByHook.delete(hook);
      this.inFlightDone.delete(done);
      // A full pool claims again once half of it is free, not after every single attempt; likewise a webhook that
      // reached its limit, once half of its attempts ended.
      if (this.inFlight <= this.concurrency / 2 || n === Math.floor(this.perWebhookLimit / 2)) this.nudge();
    });
    this.inFlightDone.add(done);
  }

  /** The secrets to sign with, seen right before sending (see noteRotation). */
  private withLatestSecrets(t: AttemptTarget): AttemptTarget {
    const note = this.rotations.get(t.webhookId);
    if (!note || note.until < Date.now() || t.secret !== note.replaced) return t;
    return { ...t, secret: note.secret, previousSecret: note.previousSecret };
  }

  private async attempt(target: AttemptTarget): Promise<void> {
    const outcome = await performAttempt(this.deps, this.withLatestSecrets(target));
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
          this.repository.fork(),
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

  /**
   * Claims up to `limit` due deliveries of active webhooks in `fair_at` order, at most `perWebhookLimit` in flight
   * per webhook, in one statement: the inner query picks the candidates (ranked per webhook to respect each one's
   * room), the outer one locks them (`SKIP LOCKED`: another process's claim is skipped) and checks again that each
   * is still pending and due, so no attempt runs twice. `held` tells whether due deliveries may have been left for
   * webhooks at their limit.
   */
  private async claim(limit: number): Promise<{ rows: ClaimedRow[]; held: boolean }> {
    const now = this.deps.clock.now();
    const leaseUntil = new Date(now.getTime() + this.leaseMs);
    const cap = this.perWebhookLimit;
    const busy = [...this.inFlightByHook];
    const full = busy.filter(([, n]) => n >= cap).map(([id]) => id);
    const partial = busy.filter(([, n]) => n < cap);
    const rows = await this.repository.claimDue({ now, leaseUntil, cap, full, partial, limit });
    let held = full.length > 0;
    if (!held && rows.length < limit) {
      const taken = new Map<string, number>();
      for (const r of rows) taken.set(r.webhook_id, (taken.get(r.webhook_id) ?? 0) + 1);
      for (const [id, n] of taken) if ((this.inFlightByHook.get(id) ?? 0) + n >= cap) held = true;
    }
    return { rows, held };
  }

  /** Deliveries whose webhook was paused, disabled (410) or deleted meanwhile end as `failed`, unattempted. */
  private async failDeliveriesOfInactiveWebhooks(): Promise<void> {
    const now = this.deps.clock.now();
    await this.repository.failDeliveriesOfInactiveWebhooks(now);
  }

  private async msUntilNextDue(): Promise<number | undefined> {
    const next = await this.repository.nextDueAt();
    if (!next) return undefined;
    return new Date(next).getTime() - this.deps.clock.now().getTime();
  }
}
