import type { FilterQuery } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { findScopedOrThrow, inOrganization } from '../../access/scope.js';
import type { Em } from '../../db/orm.js';
import { conflict, validation } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { findCursorPage } from '../../db/pagination.js';
import { checkTargetUrl } from '../../lib/safe-http.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import { performAttempt } from './delivery-attempt.js';
import { eventBody } from './delivery-fanout.js';
import { WebhookDelivery } from './webhook-delivery.entity.js';
import { newWebhookSecret } from './webhook-signing.js';
import { MAX_WEBHOOKS_PER_ORGANIZATION } from './webhooks.constants.js';
import { toDeliveryDto, toWebhookDetailDto, toWebhookSummaryDto, type StatsRow } from './webhooks.dto.js';
import { Webhook } from './webhook.entity.js';
import type {
  TCreateWebhookInput,
  TListDeliveriesInput,
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

export function getWebhookOrThrow(ctx: ActorContext, id: string): Promise<Webhook> {
  return findScopedOrThrow(ctx.em, Webhook, id, inOrganization(ctx.actor), { prefix: 'wh', what: 'Webhook' });
}

// ---------- statistics from the deliveries themselves ----------

async function deliveryStats(em: Em, webhookIds: string[], now: Date): Promise<Map<string, StatsRow>> {
  if (webhookIds.length === 0) return new Map();
  const rows = await em.execute<StatsRow[]>(
    `select "webhook_id",
            count(*) as "total",
            count(*) filter (where "status" = 'success') as "successful",
            count(*) filter (where "status" = 'failed') as "failed",
            count(*) filter (where "created_at" >= ?) as "last_30_days",
            max("last_attempt_at") as "last_delivery",
            max("delivered_at") filter (where "status" = 'success') as "last_successful",
            max("last_attempt_at") filter (where "status" = 'failed') as "last_failed",
            avg("response_time_ms") as "avg_ms"
       from "webhook_deliveries"
      where "webhook_id" in (${webhookIds.map(() => '?').join(', ')})
      group by "webhook_id"`,
    [new Date(now.getTime() - 30 * DAY_MS), ...webhookIds],
  );
  return new Map(rows.map((r) => [r.webhook_id, r]));
}

// ---------- use cases ----------

export async function listWebhooks(ctx: ActorContext) {
  const hooks = await ctx.em.find(Webhook, inOrganization(ctx.actor), {
    orderBy: { createdAt: 'desc', id: 'desc' },
  });
  const stats = await deliveryStats(
    ctx.em,
    hooks.map((h) => h.id),
    ctx.deps.clock.now(),
  );
  return {
    success: true as const,
    webhooks: hooks.map((h) => toWebhookSummaryDto(h, stats.get(h.id))),
    total: hooks.length,
  };
}

export async function createWebhook(ctx: ActorContext, input: TCreateWebhookInput) {
  const { actor } = ctx;
  await assertSafeUrl(ctx.deps, input.url);
  const count = await ctx.em.count(Webhook, inOrganization(actor));
  if (count >= MAX_WEBHOOKS_PER_ORGANIZATION) {
    throw conflict(
      `An organization can have at most ${MAX_WEBHOOKS_PER_ORGANIZATION} webhooks; delete one first`,
    );
  }
  const now = ctx.deps.clock.now();
  const hook = ctx.em.create(Webhook, {
    id: newId('wh'),
    organization: ctx.em.getReference(Organization, actor.organizationId),
    url: input.url,
    events: [...new Set(input.events)],
    description: input.description ?? null,
    secret: newWebhookSecret(),
    status: input.active === false ? 'inactive' : 'active',
    createdAt: now,
    updatedAt: now,
  });
  await ctx.em.flush();
  // The only response that carries the whole secret.
  return { success: true as const, webhook: toWebhookDetailDto(hook, undefined, 'full') };
}

export async function getWebhook(ctx: ActorContext, id: string) {
  const hook = await getWebhookOrThrow(ctx, id);
  const stats = await deliveryStats(ctx.em, [hook.id], ctx.deps.clock.now());
  return { success: true as const, webhook: toWebhookDetailDto(hook, stats.get(hook.id)) };
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
  hook.updatedAt = ctx.deps.clock.now();
  await ctx.em.flush();
  return getWebhook(ctx, hook.id);
}

export async function deleteWebhook(ctx: ActorContext, id: string) {
  const hook = await getWebhookOrThrow(ctx, id);
  // Its deliveries go with it (on delete cascade); an attempt in flight finds nothing to record.
  await ctx.em.nativeDelete(Webhook, { id: hook.id });
  return { success: true as const, message: 'Webhook deleted', id: hook.id, webhook_id: hook.id };
}

export async function listDeliveries(ctx: ActorContext, input: TListDeliveriesInput) {
  const hook = await getWebhookOrThrow(ctx, input.id);
  const where: FilterQuery<WebhookDelivery> = {
    webhook: hook.id,
    ...(input.status ? { status: input.status } : {}),
    ...(input.event_type ? { eventType: input.event_type } : {}),
  };
  const page = await findCursorPage(ctx.em, WebhookDelivery, where, input, {
    populate: ['payload'] as never,
  });
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
  });
  const outcome = await performAttempt(ctx.deps, {
    deliveryId,
    webhookId: hook.id,
    eventId,
    eventType: input.event_type,
    payload,
    attempt: 1,
    url: hook.url,
    secret: hook.secret,
  });
  const delivery = ctx.em.create(WebhookDelivery, {
    id: deliveryId,
    webhook: hook,
    organizationId: actor.organizationId,
    eventId,
    eventType: input.event_type,
    payload,
    status: outcome.success ? 'success' : 'failed',
    attempts: 1,
    nextAttemptAt: null,
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
  await ctx.em.flush();
  return { success: true as const, delivery: toDeliveryDto(delivery) };
}
