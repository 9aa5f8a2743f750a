import type { FilterQuery } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { inOrganization } from '../../access/scope.js';
import type { Em } from '../../db/orm.js';
import { AppError, notFound } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import { findCursorPage } from '../../lib/pagination.js';
import { checkTargetUrl } from '../../lib/safe-http.js';
import { iso } from '../../lib/time.js';
import type { AppDeps, Context } from '../../trpc/context.js';
import { performAttempt } from './delivery-attempt.js';
import { eventBody } from './delivery-fanout.js';
import { WebhookDelivery } from './webhook-delivery.entity.js';
import { maskSecret, newWebhookSecret } from './webhook-signing.js';
import { Webhook } from './webhook.entity.js';
import type {
  TCreateWebhookInput,
  TDelivery,
  TListDeliveriesInput,
  TTestWebhookInput,
  TUpdateWebhookInput,
  TWebhookDetail,
  TWebhookSummary,
} from './webhooks.schema.js';

/** Webhooks per organization at most: enough for any integration, bounded fan-out per event. */
export const MAX_WEBHOOKS_PER_ORGANIZATION = 100;

const DAY_MS = 86_400_000;

function actorOf(ctx: Context) {
  return ctx.actor!;
}

async function assertSafeUrl(deps: AppDeps, url: string): Promise<void> {
  const check = await checkTargetUrl(url, { allowPrivate: deps.config.webhook.allowPrivateTargets });
  if (!check.ok) {
    const message = `url ${check.reason}`;
    throw new AppError('VALIDATION_ERROR', `Invalid request: ${message}`, {
      details: [{ path: 'url', message }],
    });
  }
}

export async function getWebhookOrThrow(ctx: Context, id: string): Promise<Webhook> {
  if (!isId('wh', id)) throw notFound('Webhook');
  const hook = await ctx.em.findOne(Webhook, { id, ...inOrganization(actorOf(ctx)) });
  if (!hook) throw notFound('Webhook');
  return hook;
}

// ---------- statistics from the deliveries themselves ----------

interface StatsRow {
  webhook_id: string;
  total: string | number;
  successful: string | number;
  failed: string | number;
  last_30_days: string | number;
  last_delivery: Date | string | null;
  last_successful: Date | string | null;
  last_failed: Date | string | null;
  avg_ms: string | number | null;
}

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

const dateOrNull = (v: Date | string | null | undefined) => (v ? new Date(v).toISOString() : null);

function baseDto(h: Webhook, stats: StatsRow | undefined, secret: 'masked' | 'full') {
  return {
    id: h.id,
    url: h.url,
    events: [...h.events],
    status: h.status,
    active: h.status === 'active',
    description: h.description ?? null,
    secret: secret === 'full' ? h.secret : maskSecret(h.secret),
    created_at: iso(h.createdAt)!,
    updated_at: iso(h.updatedAt)!,
    last_delivery: dateOrNull(stats?.last_delivery),
  };
}

export function toWebhookSummaryDto(h: Webhook, stats: StatsRow | undefined): TWebhookSummary {
  return {
    ...baseDto(h, stats, 'masked'),
    delivery_stats: {
      successful: Number(stats?.successful ?? 0),
      failed: Number(stats?.failed ?? 0),
      last_30_days: Number(stats?.last_30_days ?? 0),
    },
  };
}

export function toWebhookDetailDto(
  h: Webhook,
  stats: StatsRow | undefined,
  secret: 'masked' | 'full' = 'masked',
): TWebhookDetail {
  return {
    ...baseDto(h, stats, secret),
    delivery_stats: {
      total_deliveries: Number(stats?.total ?? 0),
      successful_deliveries: Number(stats?.successful ?? 0),
      failed_deliveries: Number(stats?.failed ?? 0),
      last_successful_delivery: dateOrNull(stats?.last_successful),
      last_failed_delivery: dateOrNull(stats?.last_failed),
      average_response_time_ms:
        stats?.avg_ms === null || stats?.avg_ms === undefined ? null : Math.round(Number(stats.avg_ms)),
    },
  };
}

export function toDeliveryDto(d: WebhookDelivery): TDelivery {
  return {
    id: d.id,
    webhook_id: d.webhook.id,
    event_id: d.eventId,
    event_type: d.eventType,
    status: d.status,
    attempts: d.attempts,
    response_status: d.responseStatus ?? null,
    response_time_ms: d.responseTimeMs ?? null,
    delivered_at: iso(d.deliveredAt),
    last_attempt_at: iso(d.lastAttemptAt),
    next_attempt_at: d.status === 'pending' ? iso(d.nextAttemptAt) : null,
    error: d.lastError ?? null,
    created_at: iso(d.createdAt)!,
    event_data: JSON.parse(d.payload) as Record<string, unknown>,
  };
}

// ---------- use cases ----------

export async function listWebhooks(ctx: Context) {
  const hooks = await ctx.em.find(Webhook, inOrganization(actorOf(ctx)), {
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

export async function createWebhook(ctx: Context, input: TCreateWebhookInput) {
  const actor = actorOf(ctx);
  await assertSafeUrl(ctx.deps, input.url);
  const count = await ctx.em.count(Webhook, inOrganization(actor));
  if (count >= MAX_WEBHOOKS_PER_ORGANIZATION) {
    throw new AppError(
      'CONFLICT',
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
  ctx.response.headers.Location = `${ctx.deps.config.publicBaseUrl}/v1/webhooks/${hook.id}`;
  // The only response that carries the whole secret.
  return { success: true as const, webhook: toWebhookDetailDto(hook, undefined, 'full') };
}

export async function getWebhook(ctx: Context, id: string) {
  const hook = await getWebhookOrThrow(ctx, id);
  const stats = await deliveryStats(ctx.em, [hook.id], ctx.deps.clock.now());
  return { success: true as const, webhook: toWebhookDetailDto(hook, stats.get(hook.id)) };
}

export async function updateWebhook(ctx: Context, input: TUpdateWebhookInput) {
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

export async function deleteWebhook(ctx: Context, id: string) {
  const hook = await getWebhookOrThrow(ctx, id);
  // Its deliveries go with it (on delete cascade); an attempt in flight finds nothing to record.
  await ctx.em.nativeDelete(Webhook, { id: hook.id });
  return { success: true as const, message: 'Webhook deleted', id: hook.id, webhook_id: hook.id };
}

export async function listDeliveries(ctx: Context, input: TListDeliveriesInput) {
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
export async function testWebhook(ctx: Context, input: TTestWebhookInput) {
  const hook = await getWebhookOrThrow(ctx, input.id);
  const actor = actorOf(ctx);
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
