import type { Em } from '../../db/orm.js';
import { createSafeHttpClient, type SafeHttpClient } from '../../lib/safe-http.js';
import type { AppDeps } from '../../trpc/context.js';
import { nextRetryDelayMs } from './retry-schedule.js';
import { deliveryHeaders } from './webhook-signing.js';

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

const clients = new WeakMap<AppDeps, SafeHttpClient>();

/** The process's outbound client for webhooks (keep-alive sockets, SSRF checks at connect time). */
export function webhookHttpClient(deps: AppDeps): SafeHttpClient {
  let client = clients.get(deps);
  if (!client) {
    client = createSafeHttpClient({
      allowPrivate: deps.config.webhook.allowPrivateTargets,
      timeoutMs: deps.config.webhook.timeoutMs,
      maxResponseBytes: MAX_RESPONSE_BYTES,
    });
    clients.set(deps, client);
  }
  return client;
}

export function closeWebhookHttpClient(deps: AppDeps): void {
  clients.get(deps)?.close();
  clients.delete(deps);
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
  });
  let result;
  try {
    result = await webhookHttpClient(deps).post(t.url, body, headers);
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

/**
 * Records an attempt's outcome, guarded by the attempt number so that a worker whose lease expired can never
 * overwrite a newer attempt. Success → `success`; 410 → `failed` and the webhook `disabled`; other failures →
 * the next attempt per the retry schedule, or `failed` when it is spent. `recorded` is false when the guard did not
 match.
 */
export async function recordOutcome(
  deps: AppDeps,
  em: Em,
  t: Pick<AttemptTarget, 'deliveryId' | 'webhookId' | 'attempt'>,
  o: AttemptOutcome,
  opts: { retry: boolean } = { retry: true },
): Promise<{ recorded: boolean; status: 'pending' | 'success' | 'failed'; nextAttemptAt: Date | null }> {
  const retryIn =
    o.success || o.gone || !opts.retry
      ? undefined
      : nextRetryDelayMs(deps.config.webhook.retryScheduleMs, t.attempt);
  const status = o.success ? 'success' : retryIn === undefined ? 'failed' : 'pending';
  const nextAttemptAt = retryIn === undefined ? null : new Date(o.at.getTime() + retryIn);
  const update = async (tx: Em) => {
    const changed = await tx.execute<{ id: string }[]>(
      `update "webhook_deliveries"
          set "status" = ?, "next_attempt_at" = ?, "last_attempt_at" = ?, "delivered_at" = ?,
              "response_status" = ?, "response_time_ms" = ?, "last_error" = ?, "updated_at" = ?
        where "id" = ? and "attempts" = ? and "status" = 'pending'
        returning "id"`,
      [
        status,
        nextAttemptAt,
        o.at,
        o.success ? o.at : null,
        o.responseStatus,
        o.responseTimeMs,
        o.error?.slice(0, 500) ?? null,
        o.at,
        t.deliveryId,
        t.attempt,
      ],
    );
    if (o.gone && changed.length > 0) {
      await tx.execute(
        `update "webhooks" set "status" = 'disabled', "updated_at" = ? where "id" = ? and "status" <> 'disabled'`,
        [o.at, t.webhookId],
      );
    }
    return changed.length > 0;
  };
  const recorded = await (o.gone ? em.transactional(update) : update(em));
  return { recorded, status, nextAttemptAt };
}
