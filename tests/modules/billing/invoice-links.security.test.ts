// Test tier: server
import { Writable } from 'node:stream';
import { expect } from 'chai';
import pino from 'pino';
import { createOrg } from '../../support/factories.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { addCard, changePlan, local } from './billing-helpers.js';

/**
 * `hosted_invoice_url` and `pdf_url` are capability URLs (docs/security.md): their token must not reach the request
 * log, and the hosted page is served under a strict Content-Security-Policy.
 */
describe('invoice links: capability tokens and the hosted page', function () {
  this.timeout(60_000);
  let s: TestServer;
  const logged: string[] = [];

  before(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logged.push(chunk.toString('utf8'));
        done();
      },
    });
    // Request log lines are written at debug level only.
    s = await startTestServer({ env: { LOG_LEVEL: 'debug' }, log: pino({ level: 'debug' }, sink) });
  });
  after(async () => {
    await s?.close();
  });

  it('serves the hosted page with a strict CSP, nosniff and no referrer, and logs no token', async () => {
    const owner = await createOrg(s.deps);
    expect((await addCard(s.baseUrl, owner.token)).status).to.equal(201);
    const up = await changePlan(s.baseUrl, owner.token, { plan: 'pro' });
    expect(up.status).to.equal(200);
    const inv = up.body.invoice;
    const token = new URL(inv.hosted_invoice_url).searchParams.get('token')!;
    expect(token).to.have.length.above(10);

    const page = await fetch(local(s.baseUrl, inv.hosted_invoice_url));
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-security-policy')).to.equal(
      "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    expect(page.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(page.headers.get('referrer-policy')).to.equal('no-referrer');
    const html = await page.text();
    // What the policy allows is all the page needs: one inline style element, nothing loaded from anywhere.
    expect(html).to.include('<style>');
    expect(html).not.to.match(/<script|<img|<link|<iframe|<form|\ssrc=|\shref=/i);

    const pdf = await fetch(local(s.baseUrl, inv.pdf_url));
    expect(pdf.status).to.equal(200);
    expect(pdf.headers.get('x-content-type-options')).to.equal('nosniff');
    await pdf.arrayBuffer();

    const log = logged.join('');
    expect(log).to.include(`/v1/billing/invoices/${inv.id}/hosted?[redacted]`);
    expect(log).to.include(`/v1/billing/invoices/${inv.id}/pdf?[redacted]`);
    expect(log).not.to.include(token);
  });
});
