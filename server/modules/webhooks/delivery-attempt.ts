import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import type { Config } from '../../config.js';
import type { Em } from '../../db/orm.js';
import { createSafeHttpClient, type SafeHttpClient } from '../../lib/safe-http.js';
import type { AppDeps } from '../../kit/deps.js';
import { notifyAutoDisabled, type DisabledWebhook } from './auto-disable.js';
import { nextRetryDelayMs } from './retry-schedule.js';
import { assertCanTransition } from './webhook-delivery-state.js';
import { isTestPayload } from './delivery-fanout.js';
import { deliveryHeaders } from './webhook-signing.js';
import type { OutcomeRow } from './webhooks.repository.js';

/** What one attempt needs: the stored bytes and the webhook's current address and secret. */
export interface AttemptTarget {
  deliveryId: string;
  webhookId: string;
  eventId: string;
  eventType: string;
  /** The exact body, as stored at dispatch. */
  payload: string;
  /** 1 for the first attempt. */
  attempt: number;
  url: string;
  secret: string;
  /** The secret before a rotation, while its overlap lasts: signs too (docs/webhooks.md, "Webhooks"). */
  previousSecret: string | null;
}

export interface AttemptOutcome {
  success: boolean;
  /** The receiver answered 410 Gone: the webhook is disabled. */
  gone: boolean;
  responseStatus: number | null;
  responseTimeMs: number | null;
  error: string | null;
  at: Date;
}

/** Response bytes read at most from a receiver; only the status matters. */
export const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * The process's outbound client for webhooks (keep-alive sockets, SSRF checks at connect time):
 * `runtimeOf(deps, 'webhooks').http`, made at the first attempt and closed when the delivery worker stops.
 */
export class WebhookHttpClient {
  private client: SafeHttpClient | undefined;

  constructor(private readonly config: Config['webhook']) {}

  get(): SafeHttpClient {
    this.client ??= createSafeHttpClient({
      allowPrivate: this.config.allowPrivateTargets,
      timeoutMs: this.config.timeoutMs,
      maxResponseBytes: MAX_RESPONSE_BYTES,
    });
    return this.client;
  }

  close(): void {
    this.client?.close();
    this.client = undefined;
  }
}

/** One HTTP attempt: signs the stored bytes and posts them. Never throws; runs outside any transaction. */
export async function performAttempt(deps: AppDeps, t: AttemptTarget): Promise<AttemptOutcome> {
  const body = Buffer.from(t.payload, 'utf8');
  const headers = deliveryHeaders({
    secret: t.secret,
    body,
    messageId: t.eventId,
    // Receivers compare this with their own clock (Standard Webhooks allows 5 minutes), so it is real time.
    timestamp: Math.floor(Date.now() / 1000),
    eventType: t.eventType,
    deliveryId: t.deliveryId,
    attempt: t.attempt,
    previousSecret: t.previousSecret,
    test: isTestPayload(t.payload),
  });
  let result;
  try {
    result = await runtimeOf(deps, 'webhooks').http.get().post(t.url, body, headers);
  } catch (err) {
    deps.log.error({ err, deliveryId: t.deliveryId }, 'webhook attempt failed unexpectedly');
    result = { kind: 'error' as const, error: 'Request failed', blocked: false, timeMs: 0 };
  }
  const at = deps.clock.now();
  if (result.kind === 'response') {
    const success = result.status >= 200 && result.status < 300;
    return {
      success,
      gone: result.status === 410,
      responseStatus: result.status,
      responseTimeMs: result.timeMs,
      error: success ? null : `Receiver answered ${result.status}`,
      at,
    };
  }
  return { success: false, gone: false, responseStatus: null, responseTimeMs: null, error: result.error, at };
}

export type OutcomeStatus = 'pending' | 'success' | 'failed';

export interface OutcomeInput {
  target: Pick<AttemptTarget, 'deliveryId' | 'webhookId' | 'attempt'>;
  outcome: AttemptOutcome;
}

export interface RecordedOutcome {
  /** False when the attempt guard did not match (a lease expired and a newer attempt owns the row). */
  recorded: boolean;
  status: OutcomeStatus;
  nextAttemptAt: Date | null;
}

/** What the row becomes: success; 410 or a spent schedule → failed; otherwise pending until the next attempt. */
function nextState(
  deps: AppDeps,
  attempt: number,
  o: AttemptOutcome,
): { status: OutcomeStatus; nextAttemptAt: Date | null } {
  const retryIn =
    o.success || o.gone ? undefined : nextRetryDelayMs(deps.config.webhook.retryScheduleMs, attempt);
  const status = o.success ? 'success' : retryIn === undefined ? 'failed' : 'pending';
  // The attempt was made on a claimed delivery, which is pending (writeOutcomes guards the row the same way).
  assertCanTransition({ status: 'pending' }, status);
  return {
    status,
    nextAttemptAt: retryIn === undefined ? null : new Date(o.at.getTime() + retryIn),
  };
}

/**
 * Records the outcomes of several attempts in one statement, each guarded by its attempt number so that a worker
 * whose lease expired can never overwrite a newer attempt. In the same transaction: a 410 disables the webhook; a
 * success ends its run of failures; a failure starts one (`failing_since`) or, when the run has lasted
 * `WEBHOOK_DISABLE_AFTER`, disables the webhook, and its owner and admins are told by mail after the commit.
 */
export async function recordOutcomes(
  deps: AppDeps,
  em: Em,
  items: OutcomeInput[],
): Promise<RecordedOutcome[]> {
  if (items.length === 0) return [];
  const repository = repositoryOf(deps, 'webhooks');
  const states = items.map((i) => nextState(deps, i.target.attempt, i.outcome));
  const rows: OutcomeRow[] = items.map((item, k) => {
    const { outcome: o, target: t } = item;
    const st = states[k]!;
    return {
      deliveryId: t.deliveryId,
      attempts: t.attempt,
      status: st.status,
      nextAt: st.nextAttemptAt,
      at: o.at,
      deliveredAt: o.success ? o.at : null,
      responseStatus: o.responseStatus,
      responseTimeMs: o.responseTimeMs,
      lastError: o.error?.slice(0, 500) ?? null,
    };
  });
  const gone = items.filter((i) => i.outcome.gone);
  const write = async (tx: Em) => {
    // A success ends its webhook's run of failures (`failing_since`) in the same statement, unless that run began
    // after the success (outcomes of concurrent attempts are recorded in any order); a failure after it in this
    // batch starts a new run (trackFailureRuns).
    const changed = await repository.writeOutcomes(tx, rows);
    const done = new Set(changed.map((r) => r.id));
    for (const g of gone) {
      if (!done.has(g.target.deliveryId)) continue;
      await repository.disableGone(tx, g.target.webhookId, g.outcome.at);
    }
    disabled.push(
      ...(await trackFailureRuns(
        deps,
        tx,
        items.filter((i) => done.has(i.target.deliveryId)),
      )),
    );
    return done;
  };
  const disabled: DisabledWebhook[] = [];
  const needsTx = gone.length > 0 || items.some((i) => !i.outcome.success);
  const done = await (needsTx ? repository.transaction(em, write) : write(em));
  if (disabled.length > 0) {
    notifyAutoDisabled(deps, disabled).catch((err: unknown) =>
      deps.log.error({ err }, 'could not send the webhook auto-disable mail'),
    );
  }
  return items.map((i, k) => ({ recorded: done.has(i.target.deliveryId), ...states[k]! }));
}

/**
 * Starts or continues each failing webhook's run of failed attempts (`failing_since`) from the recorded outcomes
 * (a success already ended the stored run), and disables the webhooks whose run has lasted `WEBHOOK_DISABLE_AFTER`.
 * Returns those just disabled.
 */
async function trackFailureRuns(deps: AppDeps, tx: Em, recorded: OutcomeInput[]): Promise<DisabledWebhook[]> {
  if (recorded.length === 0) return [];
  // Per webhook, in the order of the attempts: the last success, and the first failure after it.
  const runs = new Map<string, { succeededAt?: Date; failingSince?: Date; lastAt: Date }>();
  for (const { target, outcome } of [...recorded].sort(
    (a, b) => a.outcome.at.getTime() - b.outcome.at.getTime(),
  )) {
    const run = runs.get(target.webhookId) ?? { lastAt: outcome.at };
    run.lastAt = outcome.at;
    if (outcome.success) {
      run.succeededAt = outcome.at;
      run.failingSince = undefined;
    } else {
      run.failingSince ??= outcome.at;
    }
    runs.set(target.webhookId, run);
  }
  const failing = [...runs].filter(([, r]) => r.failingSince !== undefined);
  if (failing.length === 0) return [];
  const repository = repositoryOf(deps, 'webhooks');
  const runRows = await repository.trackFailureRuns(
    tx,
    failing.map(([id, r]) => ({
      webhookId: id,
      since: r.failingSince!,
      // A success earlier in this batch ended the stored run: this batch's first failure after it starts a new one.
      mode: r.succeededAt ? 'reset' : 'keep',
      lastAt: r.lastAt,
    })),
  );
  const disableAfterMs = deps.config.webhook.disableAfterMs;
  const due = runRows.filter((r) => {
    const lastAt = runs.get(r.id)!.lastAt.getTime();
    return r.status === 'active' && lastAt - new Date(r.failing_since).getTime() >= disableAfterMs;
  });
  if (due.length === 0) return [];
  const at = new Date(Math.max(...due.map((r) => runs.get(r.id)!.lastAt.getTime())));
  return repository.disableFailing(
    tx,
    due.map((r) => r.id),
    at,
  );
}
