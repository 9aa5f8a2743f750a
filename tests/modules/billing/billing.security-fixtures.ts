import type { TestUser } from '../../support/factories.js';
import type { SecurityFixture } from '../../support/security-fixtures.js';
import type { TestServer } from '../../support/server.js';

/** Billing procedures that take an id: resources of another organization (see tests/support/security-fixtures.ts). */
export const billingSecurityFixtures: Record<string, SecurityFixture> = {
  'billing.paymentMethods.delete': async ({ s, other }) => ({ id: await otherOrgCard(s, other) }),
  'billing.invoices.get': async ({ s, other }) => ({ id: await otherOrgInvoice(s, other) }),
  'billing.invoices.pay': async ({ s, other }) => ({ id: await otherOrgInvoice(s, other) }),
};

async function otherOrgCard(s: TestServer, other: TestUser): Promise<string> {
  const { payment_method } = await s
    .caller(other.token)
    .billing.paymentMethods.create({ payment_method: 'pm_card_visa' });
  return payment_method.id;
}

/** The other organization (enterprise) moves to pro: a proration invoice. */
async function otherOrgInvoice(s: TestServer, other: TestUser): Promise<string> {
  await otherOrgCard(s, other);
  const { invoice } = await s.caller(other.token).billing.subscription.update({ plan: 'pro' });
  return invoice!.id!;
}
