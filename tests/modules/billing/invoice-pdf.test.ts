// Test tier: unit
import { inflateSync } from 'node:zlib';
import { expect } from 'chai';
import type { Organization } from '../../../server/access/organization.entity.js';
import type { Invoice } from '../../../server/modules/billing/invoice.entity.js';
import { renderInvoiceHtml, renderInvoicePdf } from '../../../server/modules/billing/invoice-documents.js';

/** An invoice as stored, for rendering alone. */
export function sampleInvoice(): Invoice {
  return {
    id: 'inv_sample00000000000000',
    number: '7KQ2ZX9M-0003',
    status: 'paid',
    billingReason: 'subscription_update',
    lineItems: [
      {
        description: 'Unused time on Starter plan (1296000 of 2592000 s)',
        amount: -1450,
        quantity: 1,
        period_start: '2027-03-16T00:00:00.000Z',
        period_end: '2027-03-31T00:00:00.000Z',
      },
      {
        description: 'Remaining time on Pro plan <b>&</b>',
        amount: 3950,
        quantity: 1,
        period_start: '2027-03-16T00:00:00.000Z',
        period_end: '2027-03-31T00:00:00.000Z',
      },
    ],
    amount: 2500,
    tax: 222,
    taxRateMilli: 8875,
    taxJurisdiction: 'US-NY',
    total: 2722,
    periodStart: new Date('2027-03-16T00:00:00.000Z'),
    periodEnd: new Date('2027-03-31T00:00:00.000Z'),
    createdAt: new Date('2027-03-16T00:00:00.000Z'),
    dueDate: new Date('2027-03-16T00:00:00.000Z'),
    paidAt: new Date('2027-03-16T00:00:00.000Z'),
    paymentMethod: { type: 'card', brand: 'visa', last4: '4242' },
  } as unknown as Invoice;
}

const org = { name: 'Acme <Labs>' } as Organization;

/**
 * Reads a PDF the way a viewer starts to: the header, the trailer's `startxref`, the cross-reference table (every
 * offset must land on its `N 0 obj`), the page tree, and the text drawn on the pages (content streams inflated,
 * the hex strings of `TJ` decoded). Enough to know the file is well formed and says what it should.
 */
function parsePdf(bytes: Buffer): { objects: number; pages: number; text: string } {
  const src = bytes.toString('latin1');
  expect(src.startsWith('%PDF-1.')).to.equal(true);
  expect(src.trimEnd().endsWith('%%EOF')).to.equal(true);
  const startxref = Number(/startxref\s+(\d+)\s+%%EOF\s*$/.exec(src)?.[1]);
  expect(src.slice(startxref, startxref + 4)).to.equal('xref');
  const table = /^xref\s+0 (\d+)\s+([\s\S]*?)trailer/m.exec(src.slice(startxref))!;
  const count = Number(table[1]);
  const entries = table[2]!.trim().split(/\s*\n\s*/);
  expect(entries).to.have.length(count);
  for (let i = 1; i < count; i++) {
    const [offset, , kind] = entries[i]!.split(' ');
    if (kind !== 'n') continue;
    expect(src.slice(Number(offset)).startsWith(`${i} 0 obj`), `object ${i} at its offset`).to.equal(true);
  }
  const pages = /\/Type \/Pages[\s\S]*?\/Count (\d+)/.exec(src);
  let text = '';
  const streams = /\/Length (\d+)(?:\s*\/Filter \/FlateDecode)?[^>]*>>\s*stream\r?\n/g;
  for (let m = streams.exec(src); m; m = streams.exec(src)) {
    const start = m.index + m[0].length;
    const raw = bytes.subarray(start, start + Number(m[1]));
    let content: string;
    try {
      content = inflateSync(raw).toString('latin1');
    } catch {
      content = raw.toString('latin1');
    }
    for (const tj of content.matchAll(/\[([^\]]*)\]\s*TJ/g)) {
      for (const hex of tj[1]!.matchAll(/<([0-9a-fA-F]*)>/g))
        text += Buffer.from(hex[1]!, 'hex').toString('latin1');
      text += ' ';
    }
  }
  return { objects: count, pages: Number(pages?.[1]), text };
}

describe('invoice documents', () => {
  it('the PDF is well formed: header, cross-references, one page, and the invoice text on it', async () => {
    const pdf = await renderInvoicePdf(sampleInvoice(), org);
    const parsed = parsePdf(pdf);
    expect(parsed.pages).to.equal(1);
    expect(parsed.objects).to.be.greaterThan(5);
    const text = parsed.text.replace(/\s+/g, ' ');
    for (const s of [
      'Invoice 7KQ2ZX9M-0003',
      'Acme <Labs>',
      '-$14.50',
      '$39.50',
      '$25.00',
      '$2.22',
      '$27.22',
      'US-NY',
      'visa',
    ]) {
      expect(text, s).to.include(s);
    }
  });

  it('the hosted page is HTML with the same figures, and escapes what customers typed', () => {
    const html = renderInvoiceHtml(sampleInvoice(), org);
    expect(html).to.match(/^<!doctype html>/);
    expect(html).to.include('Acme &lt;Labs&gt;').and.include('&lt;b&gt;&amp;&lt;/b&gt;');
    expect(html).not.to.include('<b>&</b>');
    for (const s of ['7KQ2ZX9M-0003', '-$14.50', '$27.22 USD', '8.875% US-NY']) expect(html).to.include(s);
  });
});
