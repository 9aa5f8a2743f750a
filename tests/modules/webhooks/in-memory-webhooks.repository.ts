import { Organization } from '../../../server/access/organization.entity.js';
import type { Em } from '../../../server/db/orm.js';
import type { CursorPaged } from '../../../server/db/pagination.js';
import type { DisabledWebhook } from '../../../server/modules/webhooks/auto-disable.js';
import { WebhookDelivery } from '../../../server/modules/webhooks/webhook-delivery.entity.js';
import { Webhook } from '../../../server/modules/webhooks/webhook.entity.js';
import type { StatsRow } from '../../../server/modules/webhooks/webhooks.dto.js';
import type {
  ClaimedRow,
  DeliveryListFilter,
  FailureRunRow,
  NewDelivery,
  NewWebhook,
  OutcomeRow,
  RecoveryRow,
  StoredSecrets,
  WebhooksRepository,
} from '../../../server/modules/webhooks/webhooks.repository.js';
import { NO_EM, newestFirst, reference, row } from '../../support/in-memory.js';

/** What the unit tests do not reach (the worker's claims, outcomes, retention, encryption at rest). */
function notHere(what: string): never {
  throw new Error(`${what}: not in the in-memory webhooks repository`);
}

/**
 * The webhooks repository (server/modules/webhooks/webhooks.repository.ts) over plain arrays, for unit tests of the
 * service's webhook and delivery use cases: no database, no server; held to the MikroORM repository by
 * ./webhooks.repository-contract.ts. Rows are entity instances; a change to a row is kept at once (`save` writes
 * nothing more); a transaction runs its work as it is.
 */
export class InMemoryWebhooksRepository implements WebhooksRepository {
  readonly webhooks: Webhook[] = [];
  readonly deliveries: WebhookDelivery[] = [];
  /** How many times `save` ran (a use case that changes a row saves it). */
  saves = 0;

  fork(): Em {
    return NO_EM;
  }

  transaction<R>(_em: Em, work: (tx: Em) => Promise<R>): Promise<R> {
    return work(NO_EM);
  }

  async save(): Promise<void> {
    this.saves += 1;
  }

  async findWebhook(_em: Em, organizationId: string, id: string): Promise<Webhook | null> {
    return this.webhooks.find((w) => w.id === id && w.organization.id === organizationId) ?? null;
  }

  async listWebhooks(_em: Em, organizationId: string): Promise<Webhook[]> {
    return this.webhooks.filter((w) => w.organization.id === organizationId).sort(newestFirst);
  }

  async countWebhooks(_em: Em, organizationId: string): Promise<number> {
    return this.webhooks.filter((w) => w.organization.id === organizationId).length;
  }

  createWebhook(_em: Em, w: NewWebhook): Webhook {
    const hook = row(Webhook, {
      id: w.id,
      organization: reference(Organization, w.organizationId),
      url: w.url,
      events: w.events,
      description: w.description,
      secret: w.secret,
      status: w.status,
      previousSecret: null,
      previousSecretExpiresAt: null,
      failingSince: null,
      createdAt: w.now,
      updatedAt: w.now,
    });
    this.webhooks.push(hook);
    return hook;
  }

  async deleteWebhook(_em: Em, id: string): Promise<void> {
    remove(this.webhooks, (w) => w.id === id);
    // Its deliveries go with it (on delete cascade).
    remove(this.deliveries, (d) => d.webhook.id === id);
  }

  async deliveryStats(_em: Em, webhookIds: readonly string[], since: Date): Promise<Map<string, StatsRow>> {
    const stats = new Map<string, StatsRow>();
    for (const id of webhookIds) {
      const mine = this.deliveries.filter((d) => d.webhook.id === id);
      if (mine.length === 0) continue;
      const times = (ds: WebhookDelivery[], at: (d: WebhookDelivery) => Date | null | undefined) =>
        ds.map(at).reduce<Date | null>((m, t) => (t && (!m || t > m) ? t : m), null);
      const timed = mine.filter((d) => d.responseTimeMs !== null && d.responseTimeMs !== undefined);
      stats.set(id, {
        webhook_id: id,
        total: mine.length,
        successful: mine.filter((d) => d.status === 'success').length,
        failed: mine.filter((d) => d.status === 'failed').length,
        last_30_days: mine.filter((d) => d.createdAt >= since).length,
        last_delivery: times(mine, (d) => d.lastAttemptAt),
        last_successful: times(
          mine.filter((d) => d.status === 'success'),
          (d) => d.deliveredAt,
        ),
        last_failed: times(
          mine.filter((d) => d.status === 'failed'),
          (d) => d.lastAttemptAt,
        ),
        avg_ms:
          timed.length === 0 ? null : timed.reduce((s, d) => s + Number(d.responseTimeMs), 0) / timed.length,
      });
    }
    return stats;
  }

  async findDelivery(_em: Em, webhookId: string, id: string): Promise<WebhookDelivery | null> {
    return this.deliveries.find((d) => d.id === id && d.webhook.id === webhookId) ?? null;
  }

  async listDeliveries(
    _em: Em,
    filter: DeliveryListFilter,
    page: { limit: number; starting_after?: string | undefined },
  ): Promise<CursorPaged<WebhookDelivery>> {
    const rows = this.deliveries
      .filter(
        (d) =>
          d.webhook.id === filter.webhookId &&
          (!filter.status || d.status === filter.status) &&
          (!filter.eventType || d.eventType === filter.eventType),
      )
      .sort(newestFirst);
    const start = page.starting_after ? rows.findIndex((d) => d.id === page.starting_after) + 1 : 0;
    const items = rows.slice(start, start + page.limit);
    return { items, total: rows.length, has_more: start + page.limit < rows.length };
  }

  createDelivery(_em: Em, d: NewDelivery): WebhookDelivery {
    const delivery = row(WebhookDelivery, {
      lastAttemptAt: null,
      deliveredAt: null,
      responseStatus: null,
      responseTimeMs: null,
      lastError: null,
      recoveredAt: null,
      ...d,
      redeliveryOf: d.redeliveryOf ?? null,
    });
    this.deliveries.push(delivery);
    return delivery;
  }

  markRecovered(): Promise<{ id: string; created_at: Date | string }[]> {
    return notHere('markRecovered');
  }
  lastPendingFairAt(): Promise<Date | string | null> {
    return notHere('lastPendingFairAt');
  }
  insertRecoveries(_tx: Em, _now: Date, _rows: readonly RecoveryRow[]): Promise<void> {
    return notHere('insertRecoveries');
  }
  claimDue(): Promise<ClaimedRow[]> {
    return notHere('claimDue');
  }
  failDeliveriesOfInactiveWebhooks(): Promise<void> {
    return notHere('failDeliveriesOfInactiveWebhooks');
  }
  nextDueAt(): Promise<Date | string | null> {
    return notHere('nextDueAt');
  }
  writeOutcomes(_tx: Em, _rows: readonly OutcomeRow[]): Promise<{ id: string }[]> {
    return notHere('writeOutcomes');
  }
  disableGone(): Promise<void> {
    return notHere('disableGone');
  }
  trackFailureRuns(
    _tx: Em,
    _rows: readonly FailureRunRow[],
  ): Promise<{ id: string; failing_since: Date | string; status: string }[]> {
    return notHere('trackFailureRuns');
  }
  disableFailing(): Promise<DisabledWebhook[]> {
    return notHere('disableFailing');
  }
  adminEmails(): Promise<string[]> {
    return notHere('adminEmails');
  }
  dropExpiredSecrets(): Promise<number> {
    return notHere('dropExpiredSecrets');
  }
  purgeDeliveries(): Promise<number> {
    return notHere('purgeDeliveries');
  }
  clearSecrets(): Promise<StoredSecrets[]> {
    return notHere('clearSecrets');
  }
  replaceClearSecrets(): Promise<boolean> {
    return notHere('replaceClearSecrets');
  }
}

function remove<T>(rows: T[], match: (row: T) => boolean): void {
  for (let i = rows.length - 1; i >= 0; i--) if (match(rows[i]!)) rows.splice(i, 1);
}
