import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import { randomInt } from 'node:crypto';
import type { Organization } from '../../access/organization.entity.js';
import type { Em } from '../../db/orm.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import { conflict, notFound, paymentFailed } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import { PLAN_FEATURES, PLANS, planLimit, type CountedPlanFeature, type PlanId } from '../../lib/plans.js';
import type { ProrationBehavior } from './billing.constants.js';
import { periodEndAfter, wholeSecond } from './billing-period.js';
import { toInvoiceDto, toSubscriptionDto } from './billing.dto.js';
import type {
  TPreviewInput,
  TInvoiceOutput,
  TSubscriptionOutput,
  TSubscriptionUsage,
  TUpdateSubscriptionInput,
  TUpdateSubscriptionOutput,
} from './billing.schema.js';
import type { Invoice, InvoiceLine } from './invoice.entity.js';
import {
  draftInvoice,
  issueInvoice,
  line,
  planPriceCents,
  recordSubscriptionUpdated,
  setStatus,
  type Locked,
} from './invoicing.js';
import { prorationFor } from './money.js';
import type { PaymentMethod } from './payment-method.entity.js';
import type { BillingRepository } from './billing.repository.js';
import type { Subscription } from './subscription.entity.js';
import { apiRequestsInPeriod } from './usage.service.js';

const PREFIX_ALPHABET = '0123456789ABCDEFGHJKLMNPQRSTUVWXYZ';

function invoicePrefix(): string {
  let s = '';
  for (let i = 0; i < 8; i++) s += PREFIX_ALPHABET[randomInt(PREFIX_ALPHABET.length)];
  return s;
}

/**
 * The subscription of a new organization, in the organization's transaction (the manifest's
 * `onOrganizationCreated`): the starter plan's state, `active`, periods of BILLING_PERIOD from now.
 */
export async function createSubscription(
  tx: Em,
  organization: { id: string },
  now: Date,
  deps: AppDeps,
): Promise<void> {
  const start = wholeSecond(now);
  repositoryOf(deps, 'billing').createSubscription(tx, {
    id: newId('sub'),
    now,
    organizationId: organization.id,
    currentPeriodStart: start,
    currentPeriodEnd: periodEndAfter(deps.config.billing.period, start, start),
    billingAnchor: start,
    invoicePrefix: invoicePrefix(),
  });
}

/** Tells this process's billing scheduler that a due time may have moved earlier. */
export function nudgeScheduler(deps: AppDeps): void {
  runtimeOf(deps, 'billing').scheduler.nudge();
}

const FEATURE_RESOURCE: Record<CountedPlanFeature, string> = {
  vpn_connections: 'vpn_connections',
  databases: 'databases',
  hosting_sites: 'hosting_sites',
};

/** `usage` of the subscription: each plan feature's current use against the plan (limit -1 when unlimited). */
export async function subscriptionUsage(
  em: Em,
  deps: AppDeps,
  org: Organization,
  sub: Subscription,
  now: Date,
): Promise<TSubscriptionUsage> {
  const out: Record<string, TSubscriptionUsage['vpn_connections']> = {};
  for (const feature of PLAN_FEATURES) {
    const current =
      feature === 'api_calls'
        ? await apiRequestsInPeriod(
            em,
            deps,
            org.id,
            { start: sub.currentPeriodStart, end: sub.currentPeriodEnd },
            now,
          )
        : await deps.registry.usage.current(em, org.id, feature, now);
    const limit = planLimit(org.plan, feature, org.planStatus);
    const unlimited = !Number.isFinite(limit);
    out[feature] = {
      current,
      limit: unlimited ? -1 : limit,
      unlimited,
      percentage: unlimited
        ? 0
        : limit === 0
          ? current > 0
            ? 100
            : 0
          : Math.round((current / limit) * 10_000) / 100,
    };
  }
  return out as TSubscriptionUsage;
}

async function subscriptionOutput(ctx: ActorContext, em: Em, locked: Locked): Promise<TSubscriptionOutput> {
  const now = ctx.deps.clock.now();
  const pm = await repositoryOf(ctx.deps, 'billing').defaultPaymentMethod(em, locked.org.id);
  return {
    success: true,
    subscription: toSubscriptionDto(locked.sub, locked.org, pm?.id ?? null),
    usage: await subscriptionUsage(em, ctx.deps, locked.org, locked.sub, now),
  };
}

export async function getSubscription(ctx: ActorContext): Promise<TSubscriptionOutput> {
  const sub = await repositoryOf(ctx.deps, 'billing').subscriptionOf(ctx.em, ctx.actor.organizationId);
  return subscriptionOutput(ctx, ctx.em, { sub, org: sub.organization });
}

/** The plan features whose current use is above `plan`'s limits (409 details of a refused downgrade). */
async function overLimits(
  em: Em,
  deps: AppDeps,
  organizationId: string,
  plan: PlanId,
  now: Date,
): Promise<{ resource: string; limit: number; current: number }[]> {
  const out = [];
  for (const feature of Object.keys(FEATURE_RESOURCE) as CountedPlanFeature[]) {
    const limit = planLimit(plan, feature);
    if (!Number.isFinite(limit)) continue;
    const current = await deps.registry.usage.current(em, organizationId, feature, now);
    if (current > limit) out.push({ resource: FEATURE_RESOURCE[feature], limit, current });
  }
  return out;
}

/** Whether `plan` changes the subscription: another plan, or any plan on a canceled subscription. */
function changesPlan(locked: Locked, plan: PlanId): boolean {
  return plan !== locked.org.plan || locked.sub.status === 'canceled';
}

/**
 * The check of a plan change before anything is done, for the change and its preview alike: a plan whose limits
 * are below what the organization uses → 409 with `details: [{resource, limit, current}]`.
 */
async function assertPlanFits(em: Em, deps: AppDeps, locked: Locked, plan: PlanId, now: Date): Promise<void> {
  const over = await overLimits(em, deps, locked.org.id, plan, now);
  if (over.length > 0) {
    throw conflict(
      `The ${plan} plan's limits are below what the organization uses; delete resources first`,
      over,
    );
  }
}

/** The lines a plan change makes now: the proration of the rest of the period, or a new period after a cancel. */
function changeLines(
  locked: Locked,
  plan: PlanId,
  behavior: ProrationBehavior,
  now: Date,
  deps: AppDeps,
): { lines: InvoiceLine[]; period: { start: Date; end: Date }; restart: boolean } {
  const { sub, org } = locked;
  if (sub.status === 'canceled') {
    const start = wholeSecond(now);
    const period = { start, end: periodEndAfter(deps.config.billing.period, start, start) };
    return { lines: [line(`${PLANS[plan].name} plan`, planPriceCents(plan), period)], period, restart: true };
  }
  const period = { start: sub.currentPeriodStart, end: sub.currentPeriodEnd };
  if (behavior === 'none' || plan === org.plan) return { lines: [], period, restart: false };
  const p = prorationFor(planPriceCents(org.plan), planPriceCents(plan), period, now);
  const rest = {
    start: new Date(Math.min(period.end.getTime(), Math.max(period.start.getTime(), now.getTime()))),
    end: period.end,
  };
  const oldName = PLANS[org.plan as PlanId].name;
  const newName = PLANS[plan].name;
  return {
    lines: [
      line(`Unused time on ${oldName} plan`, p.creditCents, rest),
      line(`Remaining time on ${newName} plan`, p.chargeCents, rest),
    ],
    period,
    restart: false,
  };
}

export async function previewChange(ctx: ActorContext, input: TPreviewInput): Promise<TInvoiceOutput> {
  const now = ctx.deps.clock.now();
  const behavior = input.proration_behavior ?? 'always_invoice';
  const repository = repositoryOf(ctx.deps, 'billing');
  const sub = await repository.subscriptionOf(ctx.em, ctx.actor.organizationId);
  const locked = { sub, org: sub.organization };
  // What the change would answer: a plan it would refuse is refused here too.
  if (changesPlan(locked, input.plan)) await assertPlanFits(ctx.em, ctx.deps, locked, input.plan, now);
  const { lines, period } = changeLines(locked, input.plan, behavior, now, ctx.deps);
  const { view } = draftInvoice(ctx.deps, sub, {
    lines,
    reason: sub.status === 'canceled' ? 'subscription_create' : 'subscription_update',
    period,
    now,
  });
  const pm = await repository.defaultPaymentMethod(ctx.em, ctx.actor.organizationId);
  if (pm && view.total > 0) view.paymentMethod = { type: 'card', brand: pm.brand, last4: pm.last4 };
  return { success: true, invoice: toInvoiceDto(ctx.deps, view, now) };
}

const chargeDeclined = (reason: string | undefined) =>
  paymentFailed(
    `The charge was declined (${reason ?? 'declined'}); nothing was changed. Use another payment method.`,
  );

/**
 * `PUT /billing/subscription`, in one transaction under the subscription's lock: the default payment method, then
 * the plan (charged at once, or noted for the next invoice), then `cancel_at_period_end`; one
 * `billing.subscription.updated` when anything changed. A declined charge changes nothing but its void invoice.
 */
export async function updateSubscription(
  ctx: ActorContext,
  input: TUpdateSubscriptionInput,
): Promise<TUpdateSubscriptionOutput> {
  const orgId = ctx.actor.organizationId;
  const behavior = input.proration_behavior ?? 'always_invoice';
  if (input.payment_method !== undefined && !isId('pm', input.payment_method))
    throw notFound('Payment method');
  const repository = repositoryOf(ctx.deps, 'billing');
  const result = await repository.transaction(ctx.em, async (tx) => {
    const now = ctx.deps.clock.now();
    const locked = await repository.lockSubscription(tx, orgId);
    const payment = await switchDefaultPaymentMethod(repository, tx, orgId, input.payment_method, now);
    if (
      input.cancel_at_period_end !== undefined &&
      locked.sub.status === 'canceled' &&
      input.plan === undefined
    ) {
      throw conflict('The subscription is canceled; choose a plan to start a new one');
    }
    let invoice = null;
    let planChanged = false;
    if (input.plan !== undefined && changesPlan(locked, input.plan)) {
      const change = await changePlan(tx, ctx.deps, locked, input.plan, behavior, payment.pm, now);
      if ('declined' in change) {
        await restoreDefaultPaymentMethod(repository, tx, payment);
        return change;
      }
      invoice = change.invoice;
      planChanged = true;
    }
    const cancelChanged = setCancelAtPeriodEnd(locked, input.cancel_at_period_end);
    if (payment.changed || planChanged || cancelChanged) {
      locked.sub.updatedAt = now;
      await recordSubscriptionUpdated(tx, ctx.deps, locked, now, payment.pm?.id ?? null);
    }
    return { locked, invoice };
  });
  if ('declined' in result) throw chargeDeclined(result.declined);
  nudgeScheduler(ctx.deps);
  const out = await subscriptionOutput(ctx, ctx.em, result.locked);
  return {
    ...out,
    invoice: result.invoice ? toInvoiceDto(ctx.deps, result.invoice, ctx.deps.clock.now()) : null,
  };
}

/** The default payment method before and after a change's first step; `changed` when another one became it. */
interface PaymentSwitch {
  previousDefault: PaymentMethod | null;
  pm: PaymentMethod | null;
  changed: boolean;
}

/** Makes `paymentMethodId` (one of the organization's) the default, when given and not the default already. */
async function switchDefaultPaymentMethod(
  repository: BillingRepository,
  tx: Em,
  orgId: string,
  paymentMethodId: string | undefined,
  now: Date,
): Promise<PaymentSwitch> {
  const previousDefault = await repository.defaultPaymentMethod(tx, orgId);
  if (paymentMethodId === undefined || paymentMethodId === previousDefault?.id) {
    return { previousDefault, pm: previousDefault, changed: false };
  }
  const chosen = await repository.findPaymentMethod(tx, orgId, paymentMethodId);
  if (!chosen) throw notFound('Payment method');
  if (previousDefault) previousDefault.isDefault = false;
  // The old default's flag is written first: one default per organization at any moment.
  await repository.flush(tx);
  chosen.isDefault = true;
  chosen.updatedAt = now;
  return { previousDefault, pm: chosen, changed: true };
}

/** After a declined charge: the previous default payment method stays the default. */
async function restoreDefaultPaymentMethod(
  repository: BillingRepository,
  tx: Em,
  payment: PaymentSwitch,
): Promise<void> {
  const { pm, previousDefault } = payment;
  if (!pm || pm === previousDefault) return;
  pm.isDefault = false;
  await repository.flush(tx);
  if (previousDefault) previousDefault.isDefault = true;
}

/**
 * Moves the organization to `plan`: the plan must fit what it uses; the change is invoiced and charged at once
 * (`always_invoice`, or a canceled subscription starting again) or its prorations wait for the next invoice
 * (`create_prorations`). A declined charge leaves everything as it was but the void invoice.
 */
async function changePlan(
  tx: Em,
  deps: AppDeps,
  locked: Locked,
  plan: PlanId,
  behavior: ProrationBehavior,
  pm: PaymentMethod | null,
  now: Date,
): Promise<{ invoice: Invoice | null } | { declined: string }> {
  const { sub, org } = locked;
  await assertPlanFits(tx, deps, locked, plan, now);
  const { lines, period, restart } = changeLines(locked, plan, behavior, now, deps);
  let invoice: Invoice | null = null;
  if (restart || (behavior === 'always_invoice' && lines.length > 0)) {
    const issued = await issueInvoice(tx, deps, locked, pm, {
      lines,
      reason: restart ? 'subscription_create' : 'subscription_update',
      period: restart
        ? period
        : { start: lines[0] ? new Date(lines[0].period_start!) : now, end: period.end },
      now,
      onDecline: 'void',
    });
    if (!issued.paid) return { declined: issued.declineReason ?? 'declined' };
    invoice = issued.invoice;
  } else if (behavior === 'create_prorations') {
    sub.pendingItems = [...sub.pendingItems, ...lines];
  }
  org.plan = plan;
  if (restart) restartPeriod(locked, period, now);
  return { invoice };
}

/** A canceled subscription starting again: a new period from now, active, nothing left to cancel. */
function restartPeriod(locked: Locked, period: { start: Date; end: Date }, now: Date): void {
  const { sub } = locked;
  sub.currentPeriodStart = period.start;
  sub.currentPeriodEnd = period.end;
  sub.billingAnchor = period.start;
  sub.canceledAt = null;
  sub.cancelAtPeriodEnd = false;
  setStatus(locked, 'active', now);
}

/** Sets `cancel_at_period_end` when given and different (a canceled subscription keeps its own); true if changed. */
function setCancelAtPeriodEnd(locked: Locked, cancelAtPeriodEnd: boolean | undefined): boolean {
  const { sub } = locked;
  if (
    cancelAtPeriodEnd === undefined ||
    sub.status === 'canceled' ||
    cancelAtPeriodEnd === sub.cancelAtPeriodEnd
  )
    return false;
  sub.cancelAtPeriodEnd = cancelAtPeriodEnd;
  return true;
}

export { chargeDeclined };
