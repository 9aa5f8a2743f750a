import type { AppDeps } from '../../../server/kit/deps.js';
import { Event } from '../../../server/events/event.entity.js';
import { ownPostgresDatabase } from '../../support/scratch-database.js';
import { http } from '../../support/http.js';

export async function addCard(baseUrl: string, token: string, card = 'pm_card_visa', setAsDefault?: boolean) {
  return http(baseUrl, 'POST', '/v1/billing/payment-methods', {
    token,
    body: { payment_method: card, ...(setAsDefault === undefined ? {} : { set_as_default: setAsDefault }) },
  });
}

export async function changePlan(baseUrl: string, token: string, body: Record<string, unknown>) {
  return http(baseUrl, 'PUT', '/v1/billing/subscription', { token, body });
}

/** The billing events of an organization, in the order the outbox relays them. */
export async function billingEvents(deps: AppDeps, organizationId: string) {
  const em = deps.db.orm.em.fork();
  const rows = await em.find(
    Event,
    { organizationId, type: { $like: 'billing.%' } },
    { orderBy: { seq: 'asc' } },
  );
  return rows.map((e) => ({ type: e.type, object: e.data.object as Record<string, any> }));
}

/** Every amount of an invoice view has at most two decimals, and the sums hold. */
export function expectConsistentInvoice(invoice: any): void {
  const cents = (n: number) => {
    const c = Math.round(n * 100);
    if (Math.abs(c / 100 - n) > 1e-9) throw new Error(`${n} has more than two decimals`);
    return c;
  };
  const lines = invoice.line_items.reduce((s: number, l: any) => s + cents(l.amount), 0);
  if (lines !== cents(invoice.amount))
    throw new Error(`amount ${invoice.amount} is not the sum of the lines`);
  if (cents(invoice.total) !== cents(invoice.amount) + cents(invoice.tax.amount)) {
    throw new Error(`total ${invoice.total} is not amount + tax`);
  }
}

/** A link the API made under PUBLIC_BASE_URL, sent to the test server (which listens on a port of its own). */
export function local(baseUrl: string, url: string): string {
  const u = new URL(url);
  return `${baseUrl}${u.pathname}${u.search}`;
}

/**
 * On PostgreSQL, a database of the test's own (`<test database>_<suffix>`): servers on one database share the job
 * queue and the renewal sweep, so a server with another BILLING_PERIOD or a fake clock would renew the shared
 * server's subscriptions (and the other way round). On PGlite every test server has its own database anyway.
 */
export async function ownDatabase(
  suffix: string,
): Promise<{ url: string | undefined; drop(): Promise<void> }> {
  return (await ownPostgresDatabase(suffix)) ?? { url: undefined, drop: async () => {} };
}
