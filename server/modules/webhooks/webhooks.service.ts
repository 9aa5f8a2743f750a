import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import type { Em } from '../../db/orm.js';
import { conflict, notFound, validation } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import { checkTargetUrl } from '../../lib/safe-http.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import { performAttempt } from './delivery-attempt.js';
import { eventBody } from './delivery-fanout.js';
import { newWebhookSecret } from './webhook-signing.js';
import { openWebhookSecret, sealWebhookSecret } from './webhook-secrets.js';
import {
  DELIVERY_RETENTION_DAYS,
  MAX_WEBHOOKS_PER_ORGANIZATION,
  RECOVERY_SPACING_MS,
} from './webhooks.constants.js';
import { dropExpiredSecretsJob } from './webhooks.jobs.js';
import { toDeliveryDto, toWebhookDetailDto, toWebhookSummaryDto, type StatsRow } from './webhooks.dto.js';
import type { Webhook } from './webhook.entity.js';

import type {
  TCreateWebhookInput,
  TListDeliveriesInput,
  TRecoverInput,
  TRedeliverInput,
  TRotateSecretInput,
  TTestWebhookInput,
  TUpdateWebhookInput,
} from './webhooks.schema.js';

const DAY_MS = 86_400_000;

async function assertSafeUrl(deps: AppDeps, url: string): Promise<void> {
  const check = await checkTargetUrl(url, { allowPrivate: deps.config.webhook.allowPrivateTargets });
  if (!check.ok) {
    throw validation('url', `url ${check.reason}`);
  }
}

export async function getWebhookOrThrow(ctx: ActorContext, id: string): Promise<Webhook> {
  if (!isId('wh', id)) throw notFound('Webhook');
  const hook = await repositoryOf(ctx.deps, 'webhooks').findWebhook(ctx.em, ctx.actor.organizationId, id);
  if (!hook) throw notFound('Webhook');
  return hook;
}

// ---------- statistics from the deliveries themselves ----------

function deliveryStats(
  deps: AppDeps,
  em: Em,
  webhookIds: string[],
  now: Date,
): Promise<Map<string, StatsRow>> {
  return repositoryOf(deps, 'webhooks').deliveryStats(em, webhookIds, new Date(now.getTime() - 30 * DAY_MS));
}

// ---------- use cases ----------

export async function listWebhooks(ctx: ActorContext) {
  const hooks = await repositoryOf(ctx.deps, 'webhooks').listWebhooks(ctx.em, ctx.actor.organizationId);
  const stats = await deliveryStats(
    ctx.deps,
    ctx.em,
    hooks.map((h) => h.id),
    ctx.deps.clock.now(),
  );
  return {
    success: true as const,
    webhooks: hooks.map((h) =>
      toWebhookSummaryDto(h, stats.get(h.id), openWebhookSecret(ctx.deps, h.secret)),
    ),
    total: hooks.length,
  };
}

export async function createWebhook(ctx: ActorContext, input: TCreateWebhookInput) {
  const { actor } = ctx;
  await assertSafeUrl(ctx.deps, input.url);
  const repository = repositoryOf(ctx.deps, 'webhooks');
  const count = await repository.countWebhooks(ctx.em, actor.organizationId);
  if (count >= MAX_WEBHOOKS_PER_ORGANIZATION) {
    throw conflict(
      `An organization can have at most ${MAX_WEBHOOKS_PER_ORGANIZATION} webhooks; delete one first`,
    );
  }
  const now = ctx.deps.clock.now();
  const secret = newWebhookSecret();
  const hook = repository.createWebhook(ctx.em, {
    id: newId('wh'),
    organizationId: actor.organizationId,
    url: input.url,
    events: [...new Set(input.events)],
    description: input.description ?? null,
    secret: sealWebhookSecret(ctx.deps, secret),
    status: input.active === false ? 'inactive' : 'active',
    now,
  });
  await repository.save(ctx.em);
  // The only response that carries the whole secret.
  return { success: true as const, webhook: toWebhookDetailDto(hook, undefined, secret, 'full') };
}

export async function getWebhook(ctx: ActorContext, id: string) {
  const hook = await getWebhookOrThrow(ctx, id);
  const stats = await deliveryStats(ctx.deps, ctx.em, [hook.id], ctx.deps.clock.now());
  return {
    success: true as const,
    webhook: toWebhookDetailDto(hook, stats.get(hook.id), openWebhookSecret(ctx.deps, hook.secret)),
  };
}

export async function updateWebhook(ctx: ActorContext, input: TUpdateWebhookInput) {
  const hook = await getWebhookOrThrow(ctx, input.id);
  if (input.url !== undefined && input.url !== hook.url) {
    await assertSafeUrl(ctx.deps, input.url);
    hook.url = input.url;
  }
  if (input.events !== undefined) hook.events = [...new Set(input.events)];
  if (input.description !== undefined) hook.description = input.description;
  if (input.active !== undefined) hook.status = input.active ? 'active' : 'inactive';
  // Enabled again (also after an auto-disable): a new run of failures starts from nothing.
  if (input.active === true) hook.failingSince = null;
  hook.updatedAt = ctx.deps.clock.now();
  await repositoryOf(ctx.deps, 'webhooks').save(ctx.em);
  return getWebhook(ctx, hook.id);
}

export async function deleteWebhook(ctx: ActorContext, id: string) {
  const hook = await getWebhookOrThrow(ctx, id);
  // Its deliveries go with it (on delete cascade); an attempt in flight finds nothing to record.
  await repositoryOf(ctx.deps, 'webhooks').deleteWebhook(ctx.em, hook.id);
  return { success: true as const, message: 'Webhook deleted', id: hook.id, webhook_id: hook.id };
}

export async function listDeliveries(ctx: ActorContext, input: TListDeliveriesInput) {
  const hook = await getWebhookOrThrow(ctx, input.id);
  const page = await repositoryOf(ctx.deps, 'webhooks').listDeliveries(
    ctx.em,
    { webhookId: hook.id, status: input.status, eventType: input.event_type },
    input,
  );
  return {
    success: true as const,
    deliveries: page.items.map(toDeliveryDto),
    total: page.total,
    has_more: page.has_more,
  };
}

/**
 * `POST /webhooks/:id/test`: one delivery to this webhook whatever its subscriptions and state, attempted now and
 * recorded with its outcome. A test is a probe: it is not retried (a failure is final), but a 410 still disables
 * the webhook. No transaction is open during the attempt.
 */
export async function testWebhook(ctx: ActorContext, input: TTestWebhookInput) {
  const hook = await getWebhookOrThrow(ctx, input.id);
  const { actor } = ctx;
  const createdAt = ctx.deps.clock.now();
  const eventId = newId('evt');
  const deliveryId = newId('del');
  const payload = eventBody({
    id: eventId,
    type: input.event_type,
    createdAt,
    organizationId: actor.organizationId,
    data: { object: input.custom_data ?? {} },
    // Signed like a real event, but marked as a test (body and `X-VPN-Test`): a receiver can tell it apart.
    test: true,
  });
  const outcome = await performAttempt(ctx.deps, {
    deliveryId,
    webhookId: hook.id,
    eventId,
    eventType: input.event_type,
    payload,
    attempt: 1,
    url: hook.url,
    secret: openWebhookSecret(ctx.deps, hook.secret),
    previousSecret:
      hook.previousSecretExpiresAt && hook.previousSecretExpiresAt > createdAt && hook.previousSecret
        ? openWebhookSecret(ctx.deps, hook.previousSecret)
        : null,
  });
  const repository = repositoryOf(ctx.deps, 'webhooks');
  const delivery = repository.createDelivery(ctx.em, {
    id: deliveryId,
    webhook: hook,
    organizationId: actor.organizationId,
    eventId,
    eventType: input.event_type,
    payload,
    status: outcome.success ? 'success' : 'failed',
    attempts: 1,
    nextAttemptAt: null,
    fairAt: createdAt,
    lastAttemptAt: outcome.at,
    deliveredAt: outcome.success ? outcome.at : null,
    responseStatus: outcome.responseStatus,
    responseTimeMs: outcome.responseTimeMs,
    lastError: outcome.error?.slice(0, 500) ?? null,
    createdAt,
    updatedAt: outcome.at,
  });
  if (outcome.gone) {
    hook.status = 'disabled';
    hook.updatedAt = outcome.at;
  }
  await repository.save(ctx.em);
  return { success: true as const, delivery: toDeliveryDto(delivery) };
}

// ---------- operators: redeliver, recover, rotate (docs/webhooks.md, "Webhooks") ----------

/** How far back `recover` reaches: the retention of deliveries. */
export const RECOVERY_WINDOW_MS = DELIVERY_RETENTION_DAYS * DAY_MS;
/** Rows written per statement by `recover`. */
const RECOVER_CHUNK = 2000;

function assertActive(hook: Webhook, action: string): void {
  if (hook.status !== 'active') {
    throw conflict(
      `The webhook is ${hook.status}: enable it (PUT /webhooks/${hook.id} {"active": true}) before you ${action}`,
    );
  }
}

/** Wakes this process's delivery worker after a commit that queued deliveries (others find them by polling). */
function nudgeWorker(deps: AppDeps): void {
  runtimeOf(deps, 'webhooks').deliveryWorker.nudge();
}

/**
 * `POST /webhooks/:id/deliveries/:delivery_id/redeliver`: a new delivery of the same event (same `evt_` id and
 * body), due now and retried on the schedule like any other.
 */
export async function redeliver(ctx: ActorContext, input: TRedeliverInput) {
  const hook = await getWebhookOrThrow(ctx, input.id);
  const repository = repositoryOf(ctx.deps, 'webhooks');
  const original = input.delivery_id.startsWith('del_')
    ? await repository.findDelivery(ctx.em, hook.id, input.delivery_id)
    : null;
  if (!original) throw notFound('Delivery');
  assertActive(hook, 'redeliver');
  const now = ctx.deps.clock.now();
  const delivery = repository.createDelivery(ctx.em, {
    id: newId('del'),
    webhook: hook,
    organizationId: original.organizationId,
    eventId: original.eventId,
    eventType: original.eventType,
    payload: original.payload,
    status: 'pending',
    attempts: 0,
    nextAttemptAt: now,
    fairAt: now,
    redeliveryOf: original.id,
    createdAt: now,
    updatedAt: now,
  });
  await repository.save(ctx.em);
  nudgeWorker(ctx.deps);
  return { success: true as const, delivery: toDeliveryDto(delivery) };
}

/**
 * `POST /webhooks/:id/recover {since, until?}`: a new delivery for every `failed` delivery of the webhook created in
 * the window that no recovery has re-sent yet; the originals stay `failed` and are marked recovered, in the same
 * transaction. The new deliveries go through the same queue as any other, behind other webhooks' fresh deliveries
 * (`fair_at`, delivery-worker.ts).
 */
export async function recover(ctx: ActorContext, input: TRecoverInput) {
  const hook = await getWebhookOrThrow(ctx, input.id);
  const now = ctx.deps.clock.now();
  const since = new Date(input.since);
  const until = input.until ? new Date(input.until) : now;
  if (since.getTime() < now.getTime() - RECOVERY_WINDOW_MS) {
    throw validation('since', `since must be within the last ${DELIVERY_RETENTION_DAYS} days`);
  }
  if (until.getTime() < since.getTime()) throw validation('until', 'until must not be before since');
  assertActive(hook, 'recover deliveries');

  const repository = repositoryOf(ctx.deps, 'webhooks');
  const queued = await repository.transaction(ctx.em, async (tx) => {
    const originals = await repository.markRecovered(tx, hook.id, since, until, now);
    if (originals.length === 0) return 0;
    originals.sort(
      (a, b) => new Date(a.created_at).getTime() - new Date(b.created_at).getTime() || (a.id < b.id ? -1 : 1),
    );
    // Behind any backlog of this webhook, one RECOVERY_SPACING_MS apart.
    const last = await repository.lastPendingFairAt(tx, hook.id);
    const base = Math.max(now.getTime(), last ? new Date(last).getTime() : 0);
    for (let i = 0; i < originals.length; i += RECOVER_CHUNK) {
      const chunk = originals.slice(i, i + RECOVER_CHUNK);
      await repository.insertRecoveries(
        tx,
        now,
        chunk.map((o, k) => ({
          id: newId('del'),
          originalId: o.id,
          fairAt: new Date(base + (i + k + 1) * RECOVERY_SPACING_MS),
        })),
      );
    }
    return originals.length;
  });
  if (queued > 0) nudgeWorker(ctx.deps);
  return { success: true as const, deliveries_queued: queued };
}

/**
 * `POST /webhooks/:id/rotate-secret {expires_in_hours?}`: a new secret, shown once. The replaced one keeps signing
 * (`X-VPN-Signature-Previous`, second `webhook-signature`) until it expires, then a job drops it; a further rotation
 * or `expires_in_hours: 0` drops it at once. Only one previous secret is ever kept, and it is never shown.
 */
export async function rotateSecret(ctx: ActorContext, input: TRotateSecretInput) {
  const hook = await getWebhookOrThrow(ctx, input.id);
  const now = ctx.deps.clock.now();
  const replaced = openWebhookSecret(ctx.deps, hook.secret);
  const secret = newWebhookSecret();
  const overlapMs = input.expires_in_hours * 3_600_000;
  hook.secret = sealWebhookSecret(ctx.deps, secret);
  hook.previousSecret = overlapMs > 0 ? sealWebhookSecret(ctx.deps, replaced) : null;
  hook.previousSecretExpiresAt = overlapMs > 0 ? new Date(now.getTime() + overlapMs) : null;
  hook.updatedAt = now;
  await repositoryOf(ctx.deps, 'webhooks').save(ctx.em);
  runtimeOf(ctx.deps, 'webhooks').deliveryWorker.noteRotation(
    hook.id,
    secret,
    overlapMs > 0 ? replaced : null,
    replaced,
  );
  if (overlapMs > 0) {
    // In the rotation's transaction: the drop is scheduled exactly when the new secret is committed.
    await ctx.deps.jobs.send(dropExpiredSecretsJob, {}, { em: ctx.em, delayMs: overlapMs + 1000 });
  }
  const stats = await deliveryStats(ctx.deps, ctx.em, [hook.id], now);
  return {
    success: true as const,
    webhook: toWebhookDetailDto(hook, stats.get(hook.id), secret),
    secret,
  };
}
