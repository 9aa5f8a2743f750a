import { repositoryOf } from '../../kit/runtime.js';
import type { Em } from '../../db/orm.js';
import type { AppDeps } from '../../kit/deps.js';
import { PLANS, type PlanId } from '../../lib/plans.js';
import { RENEWAL_BATCH } from './billing.constants.js';
import { periodEndAfter, periodMonths } from './billing-period.js';
import type { InvoiceLine } from './invoice.entity.js';
import {
  issueInvoice,
  line,
  planPriceCents,
  recordSubscriptionUpdated,
  retryInvoice,
  setStatus,
  type Locked,
} from './invoicing.js';
import { prorate } from './money.js';
import type { PaymentMethod } from './payment-method.entity.js';

/**
 * Each add-on (a resource billed by the time it existed, reported by its module: a database's size price) prorated
 * to the seconds it existed in `period`, half up per line. A period is billed as `periodMonths` months of the
 * monthly price.
 */
export async function addOnLines(
  em: Em,
  deps: AppDeps,
  organizationId: string,
  period: { start: Date; end: Date },
  now: Date,
): Promise<InvoiceLine[]> {
  const periodSeconds = Math.round((period.end.getTime() - period.start.getTime()) / 1000);
  const months = periodMonths(deps.config.billing.period);
  const out: InvoiceLine[] = [];
  for (const reporter of deps.registry.usageReporters) {
    if (!reporter.addOns) continue;
    for (const a of await reporter.addOns(em, organizationId, period, now)) {
      const seconds = Math.max(0, Math.min(periodSeconds, Math.round(a.seconds)));
      out.push(line(a.description, prorate(a.monthlyPriceCents * months, seconds, periodSeconds), period));
    }
  }
  return out;
}

/**
 * Renews one subscription whose period has ended (rows locked by the caller). `cancel_at_period_end` ends it
 * instead (a final invoice only for pending proration lines). Otherwise the next period starts and its invoice is
 * issued: pending prorations and add-ons of the closed period, then the plan for the new one, charged at once.
 * Idempotent: a subscription whose period has not ended (renewed already) is left alone, and the unique
 * (subscription, period start) of renewal invoices refuses a second invoice for a period whatever happens.
 */
export async function renewOne(
  tx: Em,
  deps: AppDeps,
  locked: Locked,
  pm: PaymentMethod | null,
  now: Date,
): Promise<'renewed' | 'canceled' | 'skipped'> {
  const { sub, org } = locked;
  if (sub.status === 'canceled' || sub.currentPeriodEnd > now) return 'skipped';
  const closed = { start: sub.currentPeriodStart, end: sub.currentPeriodEnd };
  const arrears = [...sub.pendingItems, ...(await addOnLines(tx, deps, org.id, closed, now))];
  sub.pendingItems = [];
  sub.updatedAt = now;

  if (sub.cancelAtPeriodEnd) {
    if (arrears.some((l) => l.amount !== 0)) {
      await issueInvoice(tx, deps, locked, pm, {
        lines: arrears,
        reason: 'subscription_final',
        period: closed,
        now,
        onDecline: 'retry',
      });
    }
    setStatus(locked, 'canceled', closed.end);
    await recordSubscriptionUpdated(tx, deps, locked, now, pm?.id ?? null);
    return 'canceled';
  }

  const next = {
    start: closed.end,
    end: periodEndAfter(deps.config.billing.period, sub.billingAnchor, closed.end),
  };
  sub.currentPeriodStart = next.start;
  sub.currentPeriodEnd = next.end;
  const plan = PLANS[org.plan as PlanId];
  await issueInvoice(tx, deps, locked, pm, {
    lines: [...arrears, line(`${plan.name} plan`, planPriceCents(org.plan), next)],
    reason: 'subscription_cycle',
    period: next,
    renewalOf: next.start,
    now,
    onDecline: 'retry',
  });
  await recordSubscriptionUpdated(tx, deps, locked, now, pm?.id ?? null);
  return 'renewed';
}

/**
 * One batch of due renewals in one transaction: subscriptions whose period ended, claimed with their
 * organizations' rows under `FOR UPDATE SKIP LOCKED`, so that several processes (or overlapping sweeps) share the
 * work and never take the same subscription. Returns how many were claimed.
 */
async function renewBatch(deps: AppDeps): Promise<number> {
  const repository = repositoryOf(deps, 'billing');
  return repository.transaction(repository.fork(), async (tx) => {
    const now = deps.clock.now();
    const rows = await repository.claimDueRenewals(tx, now, RENEWAL_BATCH);
    if (rows.length === 0) return 0;
    const orgIds = rows.map((r) => r.organization_id);
    const [subs, orgs, pms] = [
      await repository.subscriptionsByIds(
        tx,
        rows.map((r) => r.subscription_id),
      ),
      await repository.organizationsByIds(tx, orgIds),
      await repository.defaultPaymentMethodsOf(tx, orgIds),
    ];
    const orgById = new Map(orgs.map((o) => [o.id, o]));
    const pmByOrg = new Map(pms.map((p) => [p.organization.id, p]));
    for (const sub of subs) {
      const org = orgById.get(sub.organization.id)!;
      await renewOne(tx, deps, { org, sub }, pmByOrg.get(org.id) ?? null, now);
    }
    return rows.length;
  });
}

/** One batch of due charge retries (open invoices whose next attempt has come), claimed as renewals are. */
async function retryBatch(deps: AppDeps): Promise<number> {
  const repository = repositoryOf(deps, 'billing');
  return repository.transaction(repository.fork(), async (tx) => {
    const now = deps.clock.now();
    const rows = await repository.claimDueRetries(tx, now, RENEWAL_BATCH);
    if (rows.length === 0) return 0;
    const orgIds = [...new Set(rows.map((r) => r.organization_id))];
    const invoices = await repository.invoicesByIds(
      tx,
      rows.map((r) => r.invoice_id),
    );
    const subs = await repository.subscriptionsOfOrganizations(tx, orgIds);
    const orgs = await repository.organizationsByIds(tx, orgIds);
    const pms = await repository.defaultPaymentMethodsOf(tx, orgIds);
    for (const invoice of invoices) {
      const org = orgs.find((o) => o.id === invoice.organization.id)!;
      const sub = subs.find((s) => s.organization.id === org.id)!;
      const pm = pms.find((p) => p.organization.id === org.id) ?? null;
      await retryInvoice(tx, deps, { org, sub }, invoice, pm, now, true);
    }
    return rows.length;
  });
}

/**
 * Everything billing has due now: renewals of ended periods, then scheduled charge retries, in batches until none
 * is left. Safe to run in several processes at once.
 */
export async function runDueBilling(deps: AppDeps): Promise<{ renewals: number; retries: number }> {
  let renewals = 0;
  let retries = 0;
  for (;;) {
    const n = await renewBatch(deps);
    renewals += n;
    if (n < RENEWAL_BATCH) break;
  }
  for (;;) {
    const n = await retryBatch(deps);
    retries += n;
    if (n < RENEWAL_BATCH) break;
  }
  return { renewals, retries };
}

/**
 * When the organization is deleted (in its transaction, organization row already locked): the subscription is
 * canceled at once and a final invoice charges what is unbilled: pending proration lines and each database's size
 * price for the part of the period it has existed so far (the plan was billed in advance for the period). It is
 * issued even at zero, so the organization's last invoice says the subscription ended; a declined charge leaves it
 * `open` with `billing.invoice.failed` (no retry follows: the organization's rows are being removed).
 */
export async function cancelForDeletion(
  tx: Em,
  organization: { id: string },
  now: Date,
  deps: AppDeps,
): Promise<void> {
  const repository = repositoryOf(deps, 'billing');
  const locked = await repository.lockSubscription(tx, organization.id);
  const { sub } = locked;
  const pm = await repository.defaultPaymentMethod(tx, organization.id);
  if (sub.status !== 'canceled') {
    const current = { start: sub.currentPeriodStart, end: sub.currentPeriodEnd };
    const lines = [...sub.pendingItems, ...(await addOnLines(tx, deps, organization.id, current, now))];
    sub.pendingItems = [];
    sub.updatedAt = now;
    const { invoice } = await issueInvoice(tx, deps, locked, pm, {
      lines,
      reason: 'subscription_final',
      period: { start: current.start, end: now < current.end ? now : current.end },
      now,
      onDecline: 'retry',
    });
    invoice.nextPaymentAttempt = null;
  }
  if (setStatus(locked, 'canceled', now)) {
    await recordSubscriptionUpdated(tx, deps, locked, now, pm?.id ?? null);
  }
  await repository.flush(tx);
}
