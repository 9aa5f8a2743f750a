import { MikroOrmRepository } from '../../kit/repository.js';
import { LockMode } from '@mikro-orm/core';
import type { Actor } from '../../access/actor.js';
import { Organization, OrganizationSchema } from '../../access/organization.entity.js';
import { findScopedOrThrow, inOrganization } from '../../access/scope.js';
import type { Em } from '../../db/orm.js';
import { findCursorPage, type CursorPaged } from '../../db/pagination.js';
import type { EventDefinition } from '../../events/define-event.js';
import { INVOICE_STATUSES, type InvoiceStatus } from './billing.constants.js';
import { Invoice, InvoiceSchema } from './invoice.entity.js';
import { PaymentMethod, PaymentMethodSchema } from './payment-method.entity.js';
import { Subscription, SubscriptionSchema } from './subscription.entity.js';

/**
 * Every read and write of the billing module's tables (docs/adding-a-module.md, "Checklist", step 3): the services, the
 * renewals, the scheduler, the invoice documents and the manifest go through a {@link BillingRepository}, never
 * through the ORM or SQL themselves. The process gets the MikroORM one ({@link MikroOrmBillingRepository}) from the
 * module's `create` (`repositoryOf(deps, 'billing')`).
 *
 * A unit of work is an `Em` to the caller: opaque, handed back to the repository (and to the kit's functions that
 * read in the same unit, such as the usage reporters). Rows are the entities; a change to a row read in a
 * transaction is written when the transaction commits (or at {@link BillingRepository.flush}).
 */

/** The module's tables, from its entities (the manifest's lists and the SQL below name them from here). */
export const BILLING_TABLES = {
  subscriptions: SubscriptionSchema.tableName,
  paymentMethods: PaymentMethodSchema.tableName,
  invoices: InvoiceSchema.tableName,
} as const;

const T = BILLING_TABLES;
/** The core's table of organizations, which the sweeps lock with the subscriptions. */
const ORGANIZATIONS = OrganizationSchema.tableName;

/** An organization's subscription with both rows locked, organization first (the order every writer takes). */
export interface Locked {
  org: Organization;
  sub: Subscription;
}

/** A renewal claimed by a sweep: the subscription whose period ended, and its organization. */
export interface DueRenewal {
  subscription_id: string;
  organization_id: string;
}

/** A charge retry claimed by a sweep: the open invoice whose next attempt has come, and its organization. */
export interface DueRetry {
  invoice_id: string;
  organization_id: string;
}

/** What a new subscription row holds (a new organization's). */
export interface NewSubscription {
  id: string;
  organizationId: string;
  now: Date;
  currentPeriodStart: Date;
  currentPeriodEnd: Date;
  billingAnchor: Date;
  invoicePrefix: string;
}

/** What a new card row holds. */
export interface NewPaymentMethod {
  id: string;
  organizationId: string;
  now: Date;
  brand: PaymentMethod['brand'];
  last4: string;
  expMonth: number;
  expYear: number;
  processorRef: string;
  isDefault: boolean;
}

/** What a new (open, not yet charged) invoice row holds. */
export type NewInvoice = Pick<
  Invoice,
  | 'id'
  | 'number'
  | 'billingReason'
  | 'lineItems'
  | 'amount'
  | 'tax'
  | 'taxRateMilli'
  | 'taxJurisdiction'
  | 'total'
  | 'periodStart'
  | 'periodEnd'
  | 'renewalOf'
> & { organization: Organization; subscription: Subscription; now: Date };

export interface BillingRepository {
  // ---------- units of work ----------
  /** A fresh unit of work (the sweeps, the scheduler, the invoice documents). */
  fork(): Em;
  /** Runs `work` in a transaction of `em` (committed when it returns, rolled back when it throws). */
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;
  /** Writes the changes made to the rows read in `tx` now (before the transaction commits). */
  flush(tx: Em): Promise<void>;
  /** Records `event` in the outbox of `tx` (server/events/record-event.ts). */
  recordEvent<P>(tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, now: Date): void;

  // ---------- subscriptions ----------
  createSubscription(tx: Em, sub: NewSubscription): Subscription;
  /** The organization's subscription and organization, both rows locked (organization first). */
  lockSubscription(tx: Em, organizationId: string): Promise<Locked>;
  /** The organization's subscription, unlocked, with its organization. */
  subscriptionOf(em: Em, organizationId: string): Promise<Subscription>;

  // ---------- payment methods ----------
  /** The organization's default card (with its processor reference), or null. */
  defaultPaymentMethod(em: Em, organizationId: string): Promise<PaymentMethod | null>;
  /** The organization's card `id` (with its processor reference), or null. */
  findPaymentMethod(em: Em, organizationId: string, id: string): Promise<PaymentMethod | null>;
  /** The actor's organization's card `id`, or 404 `Payment method`. */
  paymentMethodInScopeOrThrow(em: Em, actor: Actor, id: string): Promise<PaymentMethod>;
  /** The actor's organization's cards, newest first. */
  listPaymentMethods(em: Em, actor: Actor): Promise<PaymentMethod[]>;
  /** How many cards the organization has besides `exceptId`. */
  countOtherPaymentMethods(tx: Em, organizationId: string, exceptId: string): Promise<number>;
  createPaymentMethod(tx: Em, pm: NewPaymentMethod): PaymentMethod;
  /** Deletes the card when the transaction commits. */
  removePaymentMethod(tx: Em, pm: PaymentMethod): void;

  // ---------- invoices ----------
  /** Stores an invoice, open and not yet charged. */
  createInvoice(tx: Em, invoice: NewInvoice): Invoice;
  /** The actor's organization's invoice `id`, or 404 `Invoice`. */
  invoiceInScopeOrThrow(em: Em, actor: Actor, id: string): Promise<Invoice>;
  /** A page of the actor's organization's invoices, newest first, counted from the list's maintained counts. */
  listInvoices(
    em: Em,
    actor: Actor,
    status: InvoiceStatus | undefined,
    page: { limit: number; starting_after?: string | undefined },
  ): Promise<CursorPaged<Invoice>>;
  /** The organization's open invoices, oldest first. */
  openInvoices(tx: Em, organizationId: string): Promise<Invoice[]>;
  /** How many open invoices the subscription has besides `exceptId`. */
  countOtherOpenInvoices(tx: Em, subscriptionId: string, exceptId: string): Promise<number>;
  /** The invoice `id` behind a signed link, with its organization unless that is deleted; null otherwise. */
  invoiceForLink(em: Em, id: string): Promise<{ invoice: Invoice; organization: Organization | null } | null>;

  // ---------- renewals and retries ----------
  /**
   * Claims up to `limit` subscriptions whose period ended by `now` (organizations not deleted), with their
   * organizations' rows, under `FOR UPDATE SKIP LOCKED`: concurrent sweeps never take the same one.
   */
  claimDueRenewals(tx: Em, now: Date, limit: number): Promise<DueRenewal[]>;
  /** Claims up to `limit` open invoices whose next attempt has come, as {@link claimDueRenewals} does. */
  claimDueRetries(tx: Em, now: Date, limit: number): Promise<DueRetry[]>;
  subscriptionsByIds(tx: Em, ids: readonly string[]): Promise<Subscription[]>;
  subscriptionsOfOrganizations(tx: Em, organizationIds: readonly string[]): Promise<Subscription[]>;
  organizationsByIds(tx: Em, ids: readonly string[]): Promise<Organization[]>;
  invoicesByIds(tx: Em, ids: readonly string[]): Promise<Invoice[]>;
  /** The default cards of the organizations (with their processor references). */
  defaultPaymentMethodsOf(tx: Em, organizationIds: readonly string[]): Promise<PaymentMethod[]>;
  /** When billing next has something due (a period end or a retry), or null. */
  nextDueAt(em: Em): Promise<Date | null>;
}

export class MikroOrmBillingRepository extends MikroOrmRepository implements BillingRepository {
  createSubscription(tx: Em, sub: NewSubscription): Subscription {
    return tx.create(Subscription, {
      id: sub.id,
      createdAt: sub.now,
      updatedAt: sub.now,
      organization: sub.organizationId,
      status: 'active',
      currentPeriodStart: sub.currentPeriodStart,
      currentPeriodEnd: sub.currentPeriodEnd,
      billingAnchor: sub.billingAnchor,
      cancelAtPeriodEnd: false,
      canceledAt: null,
      invoicePrefix: sub.invoicePrefix,
      invoiceSeq: 0,
      pendingItems: [],
      creditBalance: 0,
    });
  }

  async lockSubscription(tx: Em, organizationId: string): Promise<Locked> {
    const org = await tx.findOneOrFail(Organization, organizationId, {
      lockMode: LockMode.PESSIMISTIC_WRITE,
    });
    const sub = await tx.findOneOrFail(
      Subscription,
      { organization: organizationId },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    return { org, sub };
  }

  subscriptionOf(em: Em, organizationId: string): Promise<Subscription> {
    return em.findOneOrFail(Subscription, { organization: organizationId }, { populate: ['organization'] });
  }

  defaultPaymentMethod(em: Em, organizationId: string): Promise<PaymentMethod | null> {
    return em.findOne(
      PaymentMethod,
      { organization: organizationId, isDefault: true },
      { populate: ['processorRef'] },
    );
  }

  findPaymentMethod(em: Em, organizationId: string, id: string): Promise<PaymentMethod | null> {
    return em.findOne(PaymentMethod, { id, organization: organizationId }, { populate: ['processorRef'] });
  }

  paymentMethodInScopeOrThrow(em: Em, actor: Actor, id: string): Promise<PaymentMethod> {
    return findScopedOrThrow(em, PaymentMethod, id, inOrganization(actor), {
      prefix: 'pm',
      what: 'Payment method',
    });
  }

  listPaymentMethods(em: Em, actor: Actor): Promise<PaymentMethod[]> {
    return em.find(PaymentMethod, inOrganization(actor), { orderBy: { createdAt: 'desc', id: 'desc' } });
  }

  countOtherPaymentMethods(tx: Em, organizationId: string, exceptId: string): Promise<number> {
    return tx.count(PaymentMethod, { organization: organizationId, id: { $ne: exceptId } });
  }

  createPaymentMethod(tx: Em, pm: NewPaymentMethod): PaymentMethod {
    return tx.create(PaymentMethod, {
      id: pm.id,
      createdAt: pm.now,
      updatedAt: pm.now,
      organization: pm.organizationId,
      type: 'card',
      brand: pm.brand,
      last4: pm.last4,
      expMonth: pm.expMonth,
      expYear: pm.expYear,
      processorRef: pm.processorRef,
      isDefault: pm.isDefault,
    });
  }

  removePaymentMethod(tx: Em, pm: PaymentMethod): void {
    tx.remove(pm);
  }

  createInvoice(tx: Em, invoice: NewInvoice): Invoice {
    const { now } = invoice;
    return tx.create(Invoice, {
      id: invoice.id,
      createdAt: now,
      updatedAt: now,
      organization: invoice.organization,
      subscription: invoice.subscription,
      number: invoice.number,
      status: 'open',
      billingReason: invoice.billingReason,
      currency: 'usd',
      lineItems: invoice.lineItems,
      amount: invoice.amount,
      tax: invoice.tax,
      taxRateMilli: invoice.taxRateMilli,
      taxJurisdiction: invoice.taxJurisdiction,
      total: invoice.total,
      periodStart: invoice.periodStart,
      periodEnd: invoice.periodEnd,
      renewalOf: invoice.renewalOf,
      dueDate: now,
      paidAt: null,
      paymentMethod: null,
      chargeId: null,
      attemptCount: 0,
      scheduledRetries: 0,
      nextPaymentAttempt: null,
    });
  }

  invoiceInScopeOrThrow(em: Em, actor: Actor, id: string): Promise<Invoice> {
    return findScopedOrThrow(em, Invoice, id, inOrganization(actor), { prefix: 'inv', what: 'Invoice' });
  }

  listInvoices(
    em: Em,
    actor: Actor,
    status: InvoiceStatus | undefined,
    page: { limit: number; starting_after?: string | undefined },
  ): Promise<CursorPaged<Invoice>> {
    const where: Record<string, string> = { ...inOrganization(actor) };
    if (status) where.status = status;
    return findCursorPage(em, Invoice, where, page, {
      counted: {
        spec: {
          list: 'invoices',
          scope: 'organization',
          dims: [{ key: 'status', values: INVOICE_STATUSES }],
        },
        filter: where,
      },
    });
  }

  openInvoices(tx: Em, organizationId: string): Promise<Invoice[]> {
    return tx.find(
      Invoice,
      { organization: organizationId, status: 'open' },
      { orderBy: { createdAt: 'asc' } },
    );
  }

  countOtherOpenInvoices(tx: Em, subscriptionId: string, exceptId: string): Promise<number> {
    return tx.count(Invoice, { subscription: subscriptionId, status: 'open', id: { $ne: exceptId } });
  }

  async invoiceForLink(
    em: Em,
    id: string,
  ): Promise<{ invoice: Invoice; organization: Organization | null } | null> {
    const invoice = await em.findOne(Invoice, { id });
    if (!invoice) return null;
    const organization = await em.findOne(Organization, { id: invoice.organization.id, deletedAt: null });
    return { invoice, organization };
  }

  claimDueRenewals(tx: Em, now: Date, limit: number): Promise<DueRenewal[]> {
    return tx.execute<DueRenewal[]>(
      `select s.id as subscription_id, s.organization_id
         from ${T.subscriptions} s join ${ORGANIZATIONS} o on o.id = s.organization_id
        where s.status <> 'canceled' and s.current_period_end <= ? and o.deleted_at is null
        order by s.current_period_end
        limit ?
        for update of s, o skip locked`,
      [now, limit],
    );
  }

  claimDueRetries(tx: Em, now: Date, limit: number): Promise<DueRetry[]> {
    return tx.execute<DueRetry[]>(
      `select i.id as invoice_id, i.organization_id
         from ${T.invoices} i
         join ${T.subscriptions} s on s.id = i.subscription_id
         join ${ORGANIZATIONS} o on o.id = i.organization_id
        where i.status = 'open' and i.next_payment_attempt <= ? and o.deleted_at is null
        order by i.next_payment_attempt
        limit ?
        for update of i, s, o skip locked`,
      [now, limit],
    );
  }

  subscriptionsByIds(tx: Em, ids: readonly string[]): Promise<Subscription[]> {
    return tx.find(Subscription, { id: { $in: [...ids] } });
  }

  subscriptionsOfOrganizations(tx: Em, organizationIds: readonly string[]): Promise<Subscription[]> {
    return tx.find(Subscription, { organization: { $in: [...organizationIds] } });
  }

  organizationsByIds(tx: Em, ids: readonly string[]): Promise<Organization[]> {
    return tx.find(Organization, { id: { $in: [...ids] } });
  }

  invoicesByIds(tx: Em, ids: readonly string[]): Promise<Invoice[]> {
    return tx.find(Invoice, { id: { $in: [...ids] } });
  }

  defaultPaymentMethodsOf(tx: Em, organizationIds: readonly string[]): Promise<PaymentMethod[]> {
    return tx.find(
      PaymentMethod,
      { organization: { $in: [...organizationIds] }, isDefault: true },
      { populate: ['processorRef'] },
    );
  }

  async nextDueAt(em: Em): Promise<Date | null> {
    const rows = await em.execute<{ due: Date | string | null }[]>(
      `select least(
        (select min(current_period_end) from ${T.subscriptions} where status <> 'canceled'),
        (select min(next_payment_attempt) from ${T.invoices} where status = 'open')) as due`,
    );
    const due = rows[0]?.due;
    return due ? new Date(due) : null;
  }
}
