// Test tier: server
import { expect } from 'chai';
import { createOrg, createUser, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { addCard, billingEvents, changePlan, expectConsistentInvoice, local } from './billing-helpers.js';

describe('billing over HTTP: a customer walks through it', function () {
  this.timeout(60_000);
  let s: TestServer;
  let owner: TestUser;

  before(async () => {
    s = await sharedServer();
    owner = await createOrg(s.deps);
  });

  it('lists the plans from the plan table', async () => {
    const res = await http(s.baseUrl, 'GET', '/v1/billing/plans', { token: owner.token });
    expect(res.status).to.equal(200);
    expect(res.body.plans.map((p: any) => [p.id, p.price, p.currency, p.interval, p.popular])).to.deep.equal([
      ['starter', 29, 'usd', 'month', false],
      ['pro', 79, 'usd', 'month', true],
      ['enterprise', 199, 'usd', 'month', false],
    ]);
    expect(res.body.plans[2].features).to.deep.include({
      vpn_connections: 'unlimited',
      api_calls: 'unlimited',
      support: 'dedicated',
      sso: true,
      advanced_security: true,
    });
  });

  it('a new organization has an active starter subscription and usage against it', async () => {
    const res = await http(s.baseUrl, 'GET', '/v1/billing/subscription', { token: owner.token });
    expect(res.status).to.equal(200);
    const sub = res.body.subscription;
    expect(sub.id).to.match(/^sub_[a-z0-9]{20}$/);
    expect(sub).to.include({
      plan: 'starter',
      status: 'active',
      cancel_at_period_end: false,
      trial_end: null,
    });
    expect(Date.parse(sub.current_period_end)).to.be.above(Date.parse(sub.current_period_start));
    expect(Object.keys(res.body.usage).sort()).to.deep.equal([
      'api_calls',
      'databases',
      'hosting_sites',
      'vpn_connections',
    ]);
    expect(res.body.usage.vpn_connections).to.deep.equal({
      current: 0,
      limit: 10,
      unlimited: false,
      percentage: 0,
    });
    expect(res.body.usage.databases.limit).to.equal(2);
  });

  it('walks through cards, preview, upgrade, invoice page and PDF, downgrade, cancellation and a decline', async () => {
    // A card: the first becomes the default.
    const card = await addCard(s.baseUrl, owner.token);
    expect(card.status).to.equal(201);
    expect(card.headers.get('location')).to.match(/\/v1\/billing\/payment-methods\/pm_[a-z0-9]+$/);
    expect(card.body.payment_method).to.deep.include({ type: 'card', is_default: true });
    expect(card.body.payment_method.card).to.deep.equal({
      brand: 'visa',
      last4: '4242',
      exp_month: 12,
      exp_year: 2034,
    });
    const unknown = await addCard(s.baseUrl, owner.token, 'pm_card_unknown');
    expect(unknown.status).to.equal(400);
    expect(unknown.body.error.code).to.equal('VALIDATION_ERROR');
    const list = await http(s.baseUrl, 'GET', '/v1/billing/payment-methods', { token: owner.token });
    expect(list.body.default_payment_method).to.equal(card.body.payment_method.id);

    // Preview an upgrade: nothing changes.
    const preview = await http(s.baseUrl, 'POST', '/v1/billing/subscription/preview', {
      token: owner.token,
      body: { plan: 'pro' },
    });
    expect(preview.status).to.equal(200);
    expect(preview.body.invoice).to.include({ id: null, number: null, status: 'draft' });
    expect(preview.body.invoice.line_items).to.have.length(2);
    expect(preview.body.invoice.line_items[0].amount).to.be.below(0);
    expectConsistentInvoice(preview.body.invoice);
    const still = await http(s.baseUrl, 'GET', '/v1/billing/subscription', { token: owner.token });
    expect(still.body.subscription.plan).to.equal('starter');

    // Upgrade: invoiced and charged at once; the limits change in the same request.
    const up = await changePlan(s.baseUrl, owner.token, { plan: 'pro' });
    expect(up.status).to.equal(200);
    expect(up.body.subscription.plan).to.equal('pro');
    expect(up.body.usage.vpn_connections.limit).to.equal(50);
    const inv = up.body.invoice;
    expect(inv.id).to.match(/^inv_/);
    expect(inv.number).to.match(/^[0-9A-Z]{8}-0001$/);
    expect(inv.status).to.equal('paid');
    expect(inv.payment_method).to.deep.equal({ type: 'card', last4: '4242', brand: 'visa' });
    expect(inv.line_items.map((l: any) => l.amount)).to.deep.equal(
      preview.body.invoice.line_items.map((l: any) => l.amount),
    );
    expectConsistentInvoice(inv);

    // The invoice page and the PDF open without a token; a wrong token is a 404.
    expect(
      inv.hosted_invoice_url.startsWith(`${s.deps.config.publicBaseUrl}/v1/billing/invoices/${inv.id}/`),
    ).to.equal(true);
    const page = await fetch(local(s.baseUrl, inv.hosted_invoice_url));
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.match(/^text\/html/);
    const html = await page.text();
    expect(html).to.include(inv.number).and.include('Pro plan');
    const pdf = await fetch(local(s.baseUrl, inv.pdf_url));
    expect(pdf.status).to.equal(200);
    expect(pdf.headers.get('content-type')).to.equal('application/pdf');
    const bytes = Buffer.from(await pdf.arrayBuffer());
    expect(bytes.subarray(0, 5).toString()).to.equal('%PDF-');
    const pdfUrl = local(s.baseUrl, inv.pdf_url);
    const forged = pdfUrl.replace(
      /token=(\d+)\.(.)/,
      (_: string, exp: string, c: string) => `token=${exp}.${c === 'A' ? 'B' : 'A'}`,
    );
    expect((await fetch(forged)).status).to.equal(404);
    expect((await fetch(pdfUrl.replace(/token=.*/, 'token='))).status).to.equal(404);
    const otherInvoice = pdfUrl.replace(inv.id, 'inv_aaaaaaaaaaaaaaaaaaaa');
    expect((await fetch(otherInvoice)).status).to.equal(404);

    // The invoice in the list and in detail.
    const listed = await http(s.baseUrl, 'GET', '/v1/billing/invoices', { token: owner.token });
    expect(listed.body).to.deep.include({ total: 1, has_more: false });
    expect(listed.body.invoices[0].id).to.equal(inv.id);
    const detail = await http(s.baseUrl, 'GET', `/v1/billing/invoices/${inv.id}`, { token: owner.token });
    expect(detail.body.invoice).to.deep.include({ id: inv.id, amount: inv.amount, total: inv.total });
    expect(detail.body.invoice.tax).to.deep.equal({ amount: 0, rate: 0, jurisdiction: 'US' });

    // Same plan: 200, no invoice.
    const same = await changePlan(s.baseUrl, owner.token, { plan: 'pro' });
    expect(same.status).to.equal(200);
    expect(same.body.invoice).to.equal(null);

    // Downgrade refused while over the starter limits, accepted once under them.
    const ids: string[] = [];
    for (let i = 0; i < 11; i++) {
      const c = await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
        token: owner.token,
        body: { name: `c${i}`, location: 'eu-west', protocol: 'openvpn' },
      });
      expect(c.status).to.equal(201);
      ids.push(c.body.connection.id);
    }
    const refused = await changePlan(s.baseUrl, owner.token, { plan: 'starter' });
    expect(refused.status).to.equal(409);
    expect(refused.body.error.code).to.equal('CONFLICT');
    expect(refused.body.error.details).to.deep.equal([
      { resource: 'vpn_connections', limit: 10, current: 11 },
    ]);
    // The preview of that downgrade answers what the change answers: the same 409, code, message and details.
    const previewRefused = await http(s.baseUrl, 'POST', '/v1/billing/subscription/preview', {
      token: owner.token,
      body: { plan: 'starter' },
    });
    expect(previewRefused.status).to.equal(409);
    const { request_id: _a, ...refusedError } = refused.body.error;
    const { request_id: _b, ...previewError } = previewRefused.body.error;
    expect(previewError).to.deep.equal(refusedError);
    await http(s.baseUrl, 'DELETE', `/v1/vpn/connections/${ids[0]}`, { token: owner.token });
    const down = await changePlan(s.baseUrl, owner.token, { plan: 'starter' });
    expect(down.status).to.equal(200);
    expect(down.body.subscription.plan).to.equal('starter');
    expect(down.body.invoice.amount).to.be.below(0);
    expect(down.body.invoice.status).to.equal('paid');
    expect(down.body.subscription.credit_balance).to.equal(-down.body.invoice.amount);
    const eleventh = await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
      token: owner.token,
      body: { name: 'one too many', location: 'eu-west', protocol: 'openvpn' },
    });
    expect(eleventh.status).to.equal(402);
    expect(eleventh.body.error.details).to.deep.equal([
      { resource: 'vpn_connections', limit: 10, current: 10 },
    ]);

    // Cancellation set, then undone.
    const cancel = await changePlan(s.baseUrl, owner.token, { cancel_at_period_end: true });
    expect(cancel.status).to.equal(200);
    expect(cancel.body.subscription.cancel_at_period_end).to.equal(true);
    const undo = await changePlan(s.baseUrl, owner.token, { cancel_at_period_end: false });
    expect(undo.body.subscription.cancel_at_period_end).to.equal(false);

    // A declining card as the default: the upgrade is refused with 402 and nothing changes.
    const declining = await addCard(s.baseUrl, owner.token, 'pm_card_chargeDeclined');
    expect(declining.status).to.equal(201);
    expect(declining.body.payment_method.card).to.deep.include({ brand: 'visa', last4: '0002' });
    const declined = await changePlan(s.baseUrl, owner.token, {
      plan: 'enterprise',
      payment_method: declining.body.payment_method.id,
    });
    expect(declined.status).to.equal(402);
    expect(declined.body.error.code).to.equal('PAYMENT_FAILED');
    const after = await http(s.baseUrl, 'GET', '/v1/billing/subscription', { token: owner.token });
    expect(after.body.subscription.plan).to.equal('starter');
    expect(after.body.subscription.default_payment_method).to.equal(card.body.payment_method.id);
    const voids = await http(s.baseUrl, 'GET', '/v1/billing/invoices?status=void', { token: owner.token });
    expect(voids.body.total).to.equal(1);
    expect(voids.body.invoices[0].number).to.match(/-0003$/);

    // The default card cannot go while others exist or the subscription renews.
    const del = await http(
      s.baseUrl,
      'DELETE',
      `/v1/billing/payment-methods/${card.body.payment_method.id}`,
      {
        token: owner.token,
      },
    );
    expect(del.status).to.equal(409);
    const delOther = await http(
      s.baseUrl,
      'DELETE',
      `/v1/billing/payment-methods/${declining.body.payment_method.id}`,
      { token: owner.token },
    );
    expect(delOther.status).to.equal(200);
    expect(delOther.body).to.deep.equal({
      success: true,
      message: 'Payment method removed',
      id: declining.body.payment_method.id,
    });

    // Events: created then paid for each paid invoice; the void one failed; subscription updates.
    const events = await billingEvents(s.deps, owner.organizationId);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 3)).to.deep.equal([
      'billing.subscription.updated',
      'billing.invoice.created',
      'billing.invoice.paid',
    ]);
    expect(types).to.include('billing.invoice.failed');
  });

  it('billing reads need billing:read (owner, admin) and writes billing:write (owner)', async () => {
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const member = await createUser(s.deps, owner.organizationId, { role: 'member' });
    expect(
      (await http(s.baseUrl, 'GET', '/v1/billing/subscription', { token: admin.token })).status,
    ).to.equal(200);
    expect((await http(s.baseUrl, 'GET', '/v1/billing/invoices', { token: member.token })).status).to.equal(
      403,
    );
    const write = await changePlan(s.baseUrl, admin.token, { plan: 'pro' });
    expect(write.status).to.equal(403);
  });

  it('subscription usage and the usage report agree', async () => {
    const org = await createOrg(s.deps);
    await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
      token: org.token,
      body: { name: 'one', location: 'eu-west', protocol: 'openvpn' },
    });
    const sub = await http(s.baseUrl, 'GET', '/v1/billing/subscription', { token: org.token });
    const report = await http(s.baseUrl, 'GET', '/v1/billing/usage', { token: org.token });
    expect(report.status).to.equal(200);
    expect(report.body.current_period).to.deep.equal({
      start: sub.body.subscription.current_period_start,
      end: sub.body.subscription.current_period_end,
    });
    expect(report.body.usage.vpn.connections).to.equal(sub.body.usage.vpn_connections.current).and.equal(1);
    expect(report.body.usage.database).to.deep.equal({ instances: 0, storage_gb: 0, compute_hours: 0 });
    expect(report.body.usage.hosting).to.deep.equal({ sites: 0, bandwidth_gb: 0, build_minutes: 0 });
    expect(report.body.usage.api.requests).to.be.at.least(2);
    expect(report.body.costs).to.deep.equal({ base_plan: 29, overages: 0, add_ons: 0, total: 29 });
  });
});
