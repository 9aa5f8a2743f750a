import { MikroOrmRepository } from '../../kit/repository.js';
import type { FilterQuery } from '@mikro-orm/core';
import { Organization, OrganizationSchema } from '../../access/organization.entity.js';
import { UserSchema } from '../../access/user.entity.js';
import type { ListCountSpec } from '../../db/list-counts.js';
import type { Em } from '../../db/orm.js';
import { findCursorPage, type CursorPaged } from '../../db/pagination.js';
import type { OrganizationRows } from '../../kit/module.js';
import type { DisabledWebhook } from './auto-disable.js';
import { WebhookDelivery, WebhookDeliverySchema } from './webhook-delivery.entity.js';
import { movesSql, statusesBefore, statusListSql } from './webhook-delivery-state.js';
import { Webhook, WebhookSchema } from './webhook.entity.js';
import type { DeliveryStatus } from './webhooks.constants.js';
import type { StatsRow } from './webhooks.dto.js';

/**
 * Every read and write of the webhooks module's tables (docs/adding-a-module.md, "Checklist", step 3): the service, the
 * fan-out, the delivery worker, the jobs and the manifest go through a {@link WebhooksRepository}, never through the
 * ORM or SQL themselves. The process gets the MikroORM one ({@link MikroOrmWebhooksRepository}) from the module's
 * `create` (`repositoryOf(deps, 'webhooks')`). The manifest's hooks and the outbox handler, which are given a unit
 * of work but not the process's dependencies, call the functions exported at the end of this file.
 *
 * A unit of work is an `Em` to the caller: opaque, handed back to the repository (and to the kit's functions that
 * write in the same transaction, such as the job queue's `send`). Rows are the entities; a change to a row read in a
 * unit of work is written by {@link WebhooksRepository.save} or when its transaction commits.
 */

/** The module's tables, from its entities (the manifest's lists and the SQL below name them from here). */
export const WEBHOOKS_TABLES = {
  webhooks: WebhookSchema.tableName,
  deliveries: WebhookDeliverySchema.tableName,
} as const;

const T = WEBHOOKS_TABLES;
/** Tables of other modules read here: the recipients of the auto-disable mail, the organizations' deletion. */
const USERS = UserSchema.tableName;
const ORGANIZATIONS = OrganizationSchema.tableName;

/** What a new webhook row holds (the rest is defaulted). */
export interface NewWebhook {
  id: string;
  organizationId: string;
  url: string;
  events: string[];
  description: string | null;
  /** Sealed (webhook-secrets.ts). */
  secret: string;
  status: Webhook['status'];
  now: Date;
}

/** What a new delivery row holds (a test's, recorded with its outcome, or a redelivery, pending). */
export interface NewDelivery {
  id: string;
  webhook: Webhook;
  organizationId: string;
  eventId: string;
  eventType: string;
  payload: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: Date | null;
  fairAt: Date;
  lastAttemptAt?: Date | null;
  deliveredAt?: Date | null;
  responseStatus?: number | null;
  responseTimeMs?: number | null;
  lastError?: string | null;
  redeliveryOf?: string;
  createdAt: Date;
  updatedAt: Date;
}

/** A webhook's delivery list's filter. */
export interface DeliveryListFilter {
  webhookId: string;
  status?: DeliveryStatus | undefined;
  eventType?: string | undefined;
}

/** A new delivery of a recovery: which `failed` one it re-sends, and its place in the queue. */
export interface RecoveryRow {
  id: string;
  originalId: string;
  fairAt: Date;
}

/** An active webhook as the fan-out reads it. */
export interface SubscriberRow {
  id: string;
  organization_id: string;
  events: string[] | string;
}

/** One row of the fan-out: id, created_at, updated_at, webhook_id, organization_id, event_id, event_type, payload, next_attempt_at, fair_at. */
export type FanOutRow = unknown[];

/** A delivery claimed for an attempt, with its webhook's address and secrets (sealed). */
export interface ClaimedRow {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  payload: string;
  attempts: number;
  url: string;
  secret: string;
  previous_secret: string | null;
}

/** What a claim may take (delivery-worker.ts). */
export interface ClaimRequest {
  now: Date;
  /** The claimed deliveries are not due again before this. */
  leaseUntil: Date;
  /** Attempts in flight per webhook at most. */
  cap: number;
  /** Webhooks already at `cap`: none of theirs. */
  full: readonly string[];
  /** Webhooks with attempts in flight below `cap`, with the room they have left. */
  partial: readonly (readonly [string, number])[];
  /** Rows at most. */
  limit: number;
}

/** An attempt's outcome as written (delivery-attempt.ts), guarded by its attempt number. */
export interface OutcomeRow {
  deliveryId: string;
  attempts: number;
  status: DeliveryStatus;
  nextAt: Date | null;
  at: Date;
  deliveredAt: Date | null;
  responseStatus: number | null;
  responseTimeMs: number | null;
  lastError: string | null;
}

/** A webhook's run of failures from a batch of outcomes: `reset` starts a new run at `since`. */
export interface FailureRunRow {
  webhookId: string;
  since: Date;
  mode: 'reset' | 'keep';
  lastAt: Date;
}

/** A stored secret pair, as read for encryption at rest. */
export interface StoredSecrets {
  id: string;
  secret: string;
  previous_secret: string | null;
}

export interface WebhooksRepository {
  // ---------- units of work ----------
  /** A fresh unit of work (jobs, the worker, mails after a commit). */
  fork(): Em;
  /** Runs `work` in a transaction of `em` (committed when it returns, rolled back when it throws). */
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;
  /** Writes the rows created or changed in `em`. */
  save(em: Em): Promise<void>;

  // ---------- webhooks ----------
  /** The organization's webhook `id`; null when it is not there. */
  findWebhook(em: Em, organizationId: string, id: string): Promise<Webhook | null>;
  /** The organization's webhooks, newest first. */
  listWebhooks(em: Em, organizationId: string): Promise<Webhook[]>;
  countWebhooks(em: Em, organizationId: string): Promise<number>;
  createWebhook(em: Em, w: NewWebhook): Webhook;
  /** Deletes the webhook at once; its deliveries go with it. */
  deleteWebhook(em: Em, id: string): Promise<void>;
  /** Per webhook, its deliveries' counts and times; `since` starts the "last 30 days". */
  deliveryStats(em: Em, webhookIds: readonly string[], since: Date): Promise<Map<string, StatsRow>>;

  // ---------- deliveries ----------
  /** The webhook's delivery `id`, with its payload; null when it is not there. */
  findDelivery(em: Em, webhookId: string, id: string): Promise<WebhookDelivery | null>;
  listDeliveries(
    em: Em,
    filter: DeliveryListFilter,
    page: { limit: number; starting_after?: string | undefined },
  ): Promise<CursorPaged<WebhookDelivery>>;
  createDelivery(em: Em, d: NewDelivery): WebhookDelivery;
  /** Marks the webhook's `failed`, not yet recovered deliveries created in `[since, until]` recovered at `now`. */
  markRecovered(
    tx: Em,
    webhookId: string,
    since: Date,
    until: Date,
    now: Date,
  ): Promise<{ id: string; created_at: Date | string }[]>;
  /** The latest `fair_at` of the webhook's pending deliveries (its backlog), if any. */
  lastPendingFairAt(tx: Em, webhookId: string): Promise<Date | string | null>;
  /** Writes the new deliveries of a recovery, copies of their originals, pending and due at `now`. */
  insertRecoveries(tx: Em, now: Date, rows: readonly RecoveryRow[]): Promise<void>;

  // ---------- the delivery worker ----------
  /** Claims due deliveries of active webhooks (delivery-worker.ts): attempts bumped, lease set, in one statement. */
  claimDue(req: ClaimRequest): Promise<ClaimedRow[]>;
  /** Due deliveries of webhooks no longer active end as `failed`, unattempted. */
  failDeliveriesOfInactiveWebhooks(now: Date): Promise<void>;
  /** When the next pending delivery is due, if any. */
  nextDueAt(): Promise<Date | string | null>;
  /**
   * Writes outcomes still guarded by their attempt; a success ends its webhook's run of failures unless the run began
   * after it (a later attempt's failure recorded first). The ids written.
   */
  writeOutcomes(tx: Em, rows: readonly OutcomeRow[]): Promise<{ id: string }[]>;
  /** The receiver answered 410: the webhook is disabled. */
  disableGone(tx: Em, webhookId: string, at: Date): Promise<void>;
  /**
   * Starts or continues the webhooks' runs of failures; their state after it. `reset`: a success of the batch ended
   * the stored run, so the run starts at the batch's first failure after it, or earlier when a failure after that
   * success was recorded first.
   */
  trackFailureRuns(
    tx: Em,
    rows: readonly FailureRunRow[],
  ): Promise<{ id: string; failing_since: Date | string; status: string }[]>;
  /** Disables the still active webhooks `ids` (a run of failures lasted too long); those it disabled. */
  disableFailing(tx: Em, ids: readonly string[], at: Date): Promise<DisabledWebhook[]>;
  /** Emails of the organization's active owners and admins, oldest first. */
  adminEmails(em: Em, organizationId: string): Promise<string[]>;

  // ---------- retention ----------
  /** Drops the previous secrets expired at `now`; how many webhooks. */
  dropExpiredSecrets(now: Date): Promise<number>;
  /** Removes up to `limit` finished deliveries created before `cutoff`; how many. */
  purgeDeliveries(em: Em, cutoff: Date, limit: number): Promise<number>;

  // ---------- encryption at rest ----------
  /** Webhooks with a secret still stored in clear. */
  clearSecrets(em: Em): Promise<StoredSecrets[]>;
  /** Replaces the stored pair by the sealed one if it is still `stored`; true when it did. */
  replaceClearSecrets(
    em: Em,
    stored: StoredSecrets,
    sealed: { secret: string; previousSecret: string | null },
  ): Promise<boolean>;
}

// ---------- the MikroORM implementation ----------

/** A webhook's delivery list's maintained counts (migration 30, list_counts). */
const DELIVERY_COUNTS: ListCountSpec = {
  list: T.deliveries,
  scope: 'webhook',
  dims: [
    { key: 'status', values: [] },
    { key: 'event_type', values: [] },
  ],
};

export class MikroOrmWebhooksRepository extends MikroOrmRepository implements WebhooksRepository {
  async save(em: Em): Promise<void> {
    await em.flush();
  }

  findWebhook(em: Em, organizationId: string, id: string): Promise<Webhook | null> {
    return em.findOne(Webhook, { organization: organizationId, id });
  }

  listWebhooks(em: Em, organizationId: string): Promise<Webhook[]> {
    return em.find(Webhook, { organization: organizationId }, { orderBy: { createdAt: 'desc', id: 'desc' } });
  }

  countWebhooks(em: Em, organizationId: string): Promise<number> {
    return em.count(Webhook, { organization: organizationId });
  }

  createWebhook(em: Em, w: NewWebhook): Webhook {
    return em.create(Webhook, {
      id: w.id,
      organization: em.getReference(Organization, w.organizationId),
      url: w.url,
      events: w.events,
      description: w.description,
      secret: w.secret,
      status: w.status,
      createdAt: w.now,
      updatedAt: w.now,
    });
  }

  async deleteWebhook(em: Em, id: string): Promise<void> {
    await em.nativeDelete(Webhook, { id });
  }

  async deliveryStats(em: Em, webhookIds: readonly string[], since: Date): Promise<Map<string, StatsRow>> {
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
       from "${T.deliveries}"
      where "webhook_id" in (${webhookIds.map(() => '?').join(', ')})
      group by "webhook_id"`,
      [since, ...webhookIds],
    );
    return new Map(rows.map((r) => [r.webhook_id, r]));
  }

  findDelivery(em: Em, webhookId: string, id: string): Promise<WebhookDelivery | null> {
    return em.findOne(WebhookDelivery, { id, webhook: webhookId }, { populate: ['payload'] as never });
  }

  listDeliveries(
    em: Em,
    filter: DeliveryListFilter,
    page: { limit: number; starting_after?: string | undefined },
  ): Promise<CursorPaged<WebhookDelivery>> {
    const where: FilterQuery<WebhookDelivery> = {
      webhook: filter.webhookId,
      ...(filter.status ? { status: filter.status } : {}),
      ...(filter.eventType ? { eventType: filter.eventType } : {}),
    };
    return findCursorPage(em, WebhookDelivery, where, page, {
      populate: ['payload'] as never,
      counted: {
        spec: DELIVERY_COUNTS,
        filter: {
          webhook: filter.webhookId,
          ...(filter.status ? { status: filter.status } : {}),
          ...(filter.eventType ? { event_type: filter.eventType } : {}),
        },
      },
    });
  }

  createDelivery(em: Em, d: NewDelivery): WebhookDelivery {
    return em.create(WebhookDelivery, d);
  }

  markRecovered(
    tx: Em,
    webhookId: string,
    since: Date,
    until: Date,
    now: Date,
  ): Promise<{ id: string; created_at: Date | string }[]> {
    return tx.execute<{ id: string; created_at: Date | string }[]>(
      `update "${T.deliveries}" set "recovered_at" = ?
        where "webhook_id" = ? and "status" = 'failed' and "recovered_at" is null
          and "created_at" >= ? and "created_at" <= ?
       returning "id", "created_at"`,
      [now, webhookId, since, until],
    );
  }

  async lastPendingFairAt(tx: Em, webhookId: string): Promise<Date | string | null> {
    const [backlog] = await tx.execute<{ last: Date | string | null }[]>(
      `select max("fair_at") as "last" from "${T.deliveries}" where "webhook_id" = ? and "status" = 'pending'`,
      [webhookId],
    );
    return backlog?.last ?? null;
  }

  async insertRecoveries(tx: Em, now: Date, chunk: readonly RecoveryRow[]): Promise<void> {
    const values: unknown[] = [];
    const rows = chunk.map((r) => {
      values.push(r.id, r.originalId, r.fairAt);
      return '(?, ?, ?)';
    });
    await tx.execute(
      `insert into "${T.deliveries}"
           ("id", "created_at", "updated_at", "webhook_id", "organization_id", "event_id", "event_type", "payload",
            "next_attempt_at", "fair_at", "status", "attempts", "redelivery_of")
         select v.new_id, ?::timestamptz, ?::timestamptz, o."webhook_id", o."organization_id", o."event_id",
                o."event_type", o."payload", ?::timestamptz, v.fair_at::timestamptz, 'pending', 0, o."id"
           from (values ${rows.join(', ')}) as v(new_id, original_id, fair_at)
           join "${T.deliveries}" o on o."id" = v.original_id`,
      [now, now, now, ...values],
    );
  }

  /**
   * The inner query picks the candidates (ranked per webhook to respect each one's room), the outer one locks them
   * (`SKIP LOCKED`: another process's claim is skipped) and checks again that each is still pending and due, so no
   * attempt runs twice.
   */
  claimDue(req: ClaimRequest): Promise<ClaimedRow[]> {
    const { now, leaseUntil, cap, full, partial, limit } = req;
    const params: unknown[] = [leaseUntil, now, now];
    if (full.length > 0) params.push(...full);
    params.push(limit * 2);
    for (const [id, n] of partial) params.push(id, cap - n);
    params.push(cap, limit, now, now);
    return this.fork().execute<ClaimedRow[]>(
      `update "${T.deliveries}" d
          set "attempts" = d."attempts" + 1, "next_attempt_at" = ?, "updated_at" = ?
         from "${T.webhooks}" w
        where w."id" = d."webhook_id" and w."status" = 'active'
          and d."id" in (
            select q."id" from "${T.deliveries}" q
             where q."id" in (
               select c."id" from (
                 select c0.*, row_number() over (partition by c0."webhook_id" order by c0."fair_at", c0."id") as "rank"
                   from (select q0."id", q0."webhook_id", q0."fair_at" from "${T.deliveries}" q0
                           join "${T.webhooks}" w0 on w0."id" = q0."webhook_id" and w0."status" = 'active'
                          where q0."status" = 'pending' and q0."next_attempt_at" <= ?
                            ${full.length > 0 ? `and q0."webhook_id" not in (${full.map(() => '?').join(', ')})` : ''}
                          order by q0."fair_at"
                          limit ?) c0) c
               ${
                 partial.length > 0
                   ? `left join (values ${partial.map(() => '(?, ?::int)').join(', ')}) as f("webhook_id", "room")
                        on f."webhook_id" = c."webhook_id"
                      where c."rank" <= coalesce(f."room", ?::int)`
                   : 'where c."rank" <= ?::int'
               }
               order by c."fair_at"
               limit ?)
               and q."status" = 'pending' and q."next_attempt_at" <= ?
             for update of q skip locked)
      returning d."id", d."webhook_id", d."event_id", d."event_type", d."payload", d."attempts", w."url", w."secret",
                case when w."previous_secret_expires_at" > ? then w."previous_secret" end as "previous_secret"`,
      params,
    );
  }

  async failDeliveriesOfInactiveWebhooks(now: Date): Promise<void> {
    await this.fork().execute(
      `update "${T.deliveries}" d
          set "status" = 'failed', "next_attempt_at" = null, "updated_at" = ?,
              "last_error" = 'Not attempted: the webhook is no longer active'
         from "${T.webhooks}" w
        where w."id" = d."webhook_id" and w."status" <> 'active'
          and d."status" in ${statusListSql(statusesBefore('failed'))} and d."next_attempt_at" <= ?`,
      [now, now],
    );
  }

  async nextDueAt(): Promise<Date | string | null> {
    const rows = await this.fork().execute<{ next: Date | string | null }[]>(
      `select min("next_attempt_at") as "next" from "${T.deliveries}" where "status" = 'pending'`,
    );
    return rows[0]?.next ?? null;
  }

  writeOutcomes(tx: Em, outcomes: readonly OutcomeRow[]): Promise<{ id: string }[]> {
    const values: unknown[] = [];
    const rows = outcomes.map((o) => {
      values.push(
        o.deliveryId,
        o.attempts,
        o.status,
        o.nextAt,
        o.at,
        o.deliveredAt,
        o.responseStatus,
        o.responseTimeMs,
        o.lastError,
      );
      return '(?, ?, ?, ?, ?, ?, ?, ?, ?)';
    });
    return tx.execute<{ id: string }[]>(
      `with done as (
       update "${T.deliveries}" d
          set "status" = v.status, "next_attempt_at" = v.next_at::timestamptz, "last_attempt_at" = v.at::timestamptz,
              "delivered_at" = v.delivered_at::timestamptz, "response_status" = v.response_status::int,
              "response_time_ms" = v.response_time_ms::int, "last_error" = v.last_error, "updated_at" = v.at::timestamptz,
              "fair_at" = coalesce(v.next_at::timestamptz, d."fair_at")
         from (values ${rows.join(', ')})
              as v(id, attempts, status, next_at, at, delivered_at, response_status, response_time_ms, last_error)
        where d."id" = v.id and d."attempts" = v.attempts::int and (d."status", v.status) in ${movesSql()}
        returning d."id", d."webhook_id", d."status", v.at::timestamptz as "at"
       ), ended_runs as (
       update "${T.webhooks}" w set "failing_since" = null
        where w."failing_since" is not null
          and exists (select 1 from done
                       where done."webhook_id" = w."id" and done."status" = 'success'
                         and done."at" >= w."failing_since")
       )
       select "id" from done`,
      values,
    );
  }

  async disableGone(tx: Em, webhookId: string, at: Date): Promise<void> {
    await tx.execute(
      `update "${T.webhooks}" set "status" = 'disabled', "updated_at" = ? where "id" = ? and "status" <> 'disabled'`,
      [at, webhookId],
    );
  }

  trackFailureRuns(
    tx: Em,
    runs: readonly FailureRunRow[],
  ): Promise<{ id: string; failing_since: Date | string; status: string }[]> {
    const values: unknown[] = [];
    const rows = runs.map((r) => {
      values.push(r.webhookId, r.since, r.mode, r.lastAt);
      return '(?, ?, ?, ?)';
    });
    return tx.execute<{ id: string; failing_since: Date | string; status: string }[]>(
      `update "${T.webhooks}" w
        set "failing_since" = case when v.mode = 'reset'
                                   then least(coalesce(w."failing_since", v.since::timestamptz), v.since::timestamptz)
                                   else coalesce(w."failing_since", v.since::timestamptz) end
       from (values ${rows.join(', ')}) as v(id, since, mode, last_at)
      where w."id" = v.id
     returning w."id", w."failing_since", w."status"`,
      values,
    );
  }

  disableFailing(tx: Em, ids: readonly string[], at: Date): Promise<DisabledWebhook[]> {
    return tx.execute<DisabledWebhook[]>(
      `update "${T.webhooks}" set "status" = 'disabled', "updated_at" = ?
      where "id" in (${ids.map(() => '?').join(', ')}) and "status" = 'active'
     returning "id", "organization_id", "url", "failing_since"`,
      [at, ...ids],
    );
  }

  async adminEmails(em: Em, organizationId: string): Promise<string[]> {
    const rows = await em.execute<{ email: string }[]>(
      `select "email" from "${USERS}"
        where "organization_id" = ? and "role" in ('owner', 'admin') and "status" = 'active'
          and "deleted_at" is null
        order by "created_at"`,
      [organizationId],
    );
    return rows.map((r) => r.email);
  }

  async dropExpiredSecrets(now: Date): Promise<number> {
    const rows = await this.fork().execute<{ id: string }[]>(
      `update "${T.webhooks}" set "previous_secret" = null, "previous_secret_expires_at" = null
      where "previous_secret_expires_at" <= ?
     returning "id"`,
      [now],
    );
    return rows.length;
  }

  async purgeDeliveries(em: Em, cutoff: Date, limit: number): Promise<number> {
    const rows = await em.execute<{ id: string }[]>(
      `delete from "${T.deliveries}" where "id" in (
         select "id" from "${T.deliveries}"
          where "created_at" < ? and "status" <> 'pending'
          limit ${limit})
       returning "id"`,
      [cutoff],
    );
    return rows.length;
  }

  clearSecrets(em: Em): Promise<StoredSecrets[]> {
    return em.execute<StoredSecrets[]>(
      `select "id", "secret", "previous_secret" from "${T.webhooks}"
      where left("secret", 6) = 'whsec_' or left("previous_secret", 6) = 'whsec_'`,
    );
  }

  async replaceClearSecrets(
    em: Em,
    stored: StoredSecrets,
    sealed: { secret: string; previousSecret: string | null },
  ): Promise<boolean> {
    const updated = await em.execute<{ id: string }[]>(
      `update "${T.webhooks}" set "secret" = ?, "previous_secret" = ?
        where "id" = ? and "secret" = ? and "previous_secret" is not distinct from ?
       returning "id"`,
      [sealed.secret, sealed.previousSecret, stored.id, stored.secret, stored.previous_secret],
    );
    return updated.length > 0;
  }
}

// ---------- given a unit of work only: the outbox handler and the manifest's hooks ----------

/** Active webhooks of the organizations `organizationIds`. */
export function activeWebhooksOf(em: Em, organizationIds: readonly string[]): Promise<SubscriberRow[]> {
  return em.execute<SubscriberRow[]>(
    `select "id", "organization_id", "events" from "${T.webhooks}"
          where "status" = 'active' and "organization_id" in (${organizationIds.map(() => '?').join(', ')})`,
    [...organizationIds],
  );
}

/** Active webhooks of every organization not being deleted (platform events). */
export function activeWebhooksOfLiveOrganizations(em: Em): Promise<SubscriberRow[]> {
  return em.execute<SubscriberRow[]>(
    // Not to a deleted organization's webhooks: its rows are being removed (docs/organization.md, "The organization").
    `select w."id", w."organization_id", w."events" from "${T.webhooks}" w
         join "${ORGANIZATIONS}" o on o."id" = w."organization_id"
        where w."status" = 'active' and o."deleted_at" is null`,
  );
}

/** Writes pending deliveries due at once; one already written for the same event and webhook is left as it is. */
export async function insertFannedOutDeliveries(em: Em, chunk: readonly FanOutRow[]): Promise<void> {
  await em.execute(
    `insert into "${T.deliveries}"
         ("id", "created_at", "updated_at", "webhook_id", "organization_id", "event_id", "event_type", "payload",
          "next_attempt_at", "fair_at", "status", "attempts")
       values ${chunk.map(() => `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0)`).join(', ')}
       on conflict ("event_id", "webhook_id") where "redelivery_of" is null do nothing`,
    chunk.flat(),
  );
}

/** The organization's deliveries created in the period (the usage report). */
export function countDeliveriesIn(
  em: Em,
  organizationId: string,
  period: { start: Date; end: Date },
): Promise<number> {
  return em.count(WebhookDelivery, {
    organizationId,
    createdAt: { $gte: period.start, $lt: period.end },
  });
}

/** True while a delivery of the organization waits for its first attempt. */
export async function firstAttemptsPending(em: Em, organizationId: string): Promise<boolean> {
  const rows = await em.execute<{ n: number }[]>(
    `select count(*)::int as n from "${T.deliveries}"
          where "organization_id" = ? and "status" = 'pending' and "attempts" = 0`,
    [organizationId],
  );
  return Number(rows[0]?.n ?? 0) > 0;
}

/** How the organization's rows go when it is deleted; removal waits for the first attempts of its deliveries. */
export const WEBHOOKS_ORGANIZATION_ROWS: OrganizationRows = {
  remove: [{ table: T.deliveries }, { table: T.webhooks }],
  // The events the deletion caused (vpn.disconnected, the final invoice) still reach the organization's
  // webhooks: removal waits for the first attempt of each delivery (retries are not waited for).
  busy: firstAttemptsPending,
};
