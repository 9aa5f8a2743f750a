import { repositoryOf } from '../../kit/runtime.js';
import type { Organization } from '../../access/organization.entity.js';
import type { AppDeps } from '../../kit/deps.js';
import type { ModuleHttpRoute } from '../../kit/module.js';
import { notFound } from '../../lib/errors.js';
import { isId } from '../../lib/ids.js';
import { checkInvoiceLinkToken } from './billing.dto.js';
import type { Invoice, InvoiceLine } from './invoice.entity.js';

const money = (cents: number) =>
  `${cents < 0 ? '-' : ''}$${(Math.abs(cents) / 100).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
const day = (d: Date | null | undefined) => (d ? d.toISOString().slice(0, 10) : '');
const lineDates = (l: InvoiceLine) =>
  l.period_start && l.period_end ? `${l.period_start.slice(0, 10)} – ${l.period_end.slice(0, 10)}` : '';

const STATUS_LABEL: Record<Invoice['status'], string> = {
  draft: 'Draft',
  open: 'Due',
  paid: 'Paid',
  void: 'Void',
  uncollectible: 'Uncollectible',
};

function escapeHtml(s: string): string {
  return s.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );
}

/** The invoice behind a signed link, or 404 for a wrong, expired or foreign token. */
async function invoiceForLink(
  deps: AppDeps,
  id: string,
  token: string | undefined,
): Promise<{ invoice: Invoice; organization: Organization }> {
  const now = deps.clock.now();
  if (!isId('inv', id) || !token || !checkInvoiceLinkToken(deps, id, token, now)) throw notFound('Invoice');
  const repository = repositoryOf(deps, 'billing');
  const found = await repository.invoiceForLink(repository.fork(), id);
  if (!found) throw notFound('Invoice');
  // Nothing of a deleted organization is readable (docs/organization.md, "The organization").
  const { invoice, organization } = found;
  if (!organization) throw notFound('Invoice');
  return { invoice, organization };
}

/** The hosted invoice page: a self-contained HTML document a person can read and print. */
export function renderInvoiceHtml(invoice: Invoice, organization: Organization): string {
  const rows = invoice.lineItems
    .map(
      (l) => `<tr><td>${escapeHtml(l.description)}<div class="muted">${lineDates(l)}</div></td>
        <td class="num">${l.quantity}</td><td class="num">${money(l.amount)}</td></tr>`,
    )
    .join('\n');
  const card = invoice.paymentMethod
    ? `${escapeHtml(invoice.paymentMethod.brand)} •••• ${escapeHtml(invoice.paymentMethod.last4)}`
    : '—';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Invoice ${escapeHtml(invoice.number)}</title>
<style>
  body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1a1a2e; max-width: 760px;
         margin: 40px auto; padding: 0 20px; }
  h1 { font-size: 28px; margin: 0 0 4px; } .muted { color: #6b7280; font-size: 13px; }
  .status { display: inline-block; padding: 2px 10px; border-radius: 12px; background: #eef2ff; font-weight: 600; }
  .status.paid { background: #dcfce7; color: #166534; } .status.open { background: #fef9c3; color: #854d0e; }
  table { width: 100%; border-collapse: collapse; margin-top: 24px; }
  th, td { text-align: left; padding: 10px 6px; border-bottom: 1px solid #e5e7eb; vertical-align: top; }
  .num { text-align: right; white-space: nowrap; } .totals td { border: none; padding: 4px 6px; }
  .grand td { font-weight: 700; font-size: 18px; border-top: 2px solid #1a1a2e; }
  dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin-top: 20px; } dt { color: #6b7280; }
</style></head>
<body>
<h1>Invoice ${escapeHtml(invoice.number)}</h1>
<span class="status ${invoice.status}">${STATUS_LABEL[invoice.status]}</span>
<dl>
  <dt>Billed to</dt><dd>${escapeHtml(organization.name)}</dd>
  <dt>Issued</dt><dd>${day(invoice.createdAt)}</dd>
  <dt>Due</dt><dd>${day(invoice.dueDate)}</dd>
  ${invoice.paidAt ? `<dt>Paid</dt><dd>${day(invoice.paidAt)}</dd>` : ''}
  <dt>Payment method</dt><dd>${card}</dd>
  ${invoice.periodStart ? `<dt>Period</dt><dd>${day(invoice.periodStart)} – ${day(invoice.periodEnd)}</dd>` : ''}
</dl>
<table>
  <thead><tr><th>Description</th><th class="num">Qty</th><th class="num">Amount</th></tr></thead>
  <tbody>
${rows}
  </tbody>
  <tbody class="totals">
    <tr><td></td><td class="num">Subtotal</td><td class="num">${money(invoice.amount)}</td></tr>
    <tr><td></td><td class="num">Tax (${invoice.taxRateMilli / 1000}% ${escapeHtml(invoice.taxJurisdiction)})</td>
        <td class="num">${money(invoice.tax)}</td></tr>
    <tr class="grand"><td></td><td class="num">Total</td><td class="num">${money(invoice.total)} USD</td></tr>
  </tbody>
</table>
</body></html>
`;
}

/**
 * The invoice as a PDF (pdfkit, the built-in Helvetica: no font files to ship). pdfkit is loaded on the first PDF,
 * not at start: most processes never render one.
 */
export async function renderInvoicePdf(invoice: Invoice, organization: Organization): Promise<Buffer> {
  const { default: PDFDocument } = await import('pdfkit');
  return new Promise((resolve, reject) => {
    const doc = new PDFDocument({
      size: 'A4',
      margin: 50,
      info: { Title: `Invoice ${invoice.number}`, Author: 'Cloud Platform', CreationDate: invoice.createdAt },
    });
    const chunks: Buffer[] = [];
    doc.on('data', (c: Buffer) => chunks.push(c));
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);

    doc.font('Helvetica-Bold').fontSize(22).text(`Invoice ${invoice.number}`);
    doc.font('Helvetica').fontSize(11).fillColor('#555555').text(STATUS_LABEL[invoice.status]);
    doc.moveDown();
    doc.fillColor('#000000');
    const facts: [string, string][] = [
      ['Billed to', organization.name],
      ['Issued', day(invoice.createdAt)],
      ['Due', day(invoice.dueDate)],
    ];
    if (invoice.paidAt) facts.push(['Paid', day(invoice.paidAt)]);
    if (invoice.paymentMethod) {
      facts.push(['Payment method', `${invoice.paymentMethod.brand} **** ${invoice.paymentMethod.last4}`]);
    }
    if (invoice.periodStart)
      facts.push(['Period', `${day(invoice.periodStart)} - ${day(invoice.periodEnd)}`]);
    for (const [k, v] of facts) {
      doc.font('Helvetica-Bold').text(`${k}: `, { continued: true }).font('Helvetica').text(v);
    }
    doc.moveDown(1.5);

    const left = 50;
    const qtyX = 380;
    const amountX = 430;
    const width = 495;
    const header = doc.y;
    doc.font('Helvetica-Bold').text('Description', left, header);
    doc.text('Qty', qtyX, header, { width: 40, align: 'right' });
    doc.text('Amount', amountX, header, { width: left + width - amountX, align: 'right' });
    doc
      .moveTo(left, doc.y + 4)
      .lineTo(left + width, doc.y + 4)
      .stroke();
    doc.moveDown(0.8);
    doc.font('Helvetica');
    for (const l of invoice.lineItems) {
      const y = doc.y;
      const dates = lineDates(l).replace('–', '-');
      doc.text(l.description + (dates ? `\n${dates}` : ''), left, y, { width: qtyX - left - 10 });
      const after = doc.y;
      doc.text(String(l.quantity), qtyX, y, { width: 40, align: 'right' });
      doc.text(money(l.amount), amountX, y, { width: left + width - amountX, align: 'right' });
      doc.y = after + 6;
    }
    doc
      .moveTo(left, doc.y)
      .lineTo(left + width, doc.y)
      .stroke();
    doc.moveDown(0.5);
    const total = (label: string, value: string, bold = false) => {
      const y = doc.y;
      doc.font(bold ? 'Helvetica-Bold' : 'Helvetica');
      doc.text(label, 280, y, { width: 140, align: 'right' });
      doc.text(value, amountX, y, { width: left + width - amountX, align: 'right' });
      doc.moveDown(0.3);
    };
    total('Subtotal', money(invoice.amount));
    total(`Tax (${invoice.taxRateMilli / 1000}% ${invoice.taxJurisdiction})`, money(invoice.tax));
    total('Total (USD)', money(invoice.total), true);
    doc.end();
  });
}

const noStore = { 'Cache-Control': 'private, no-store' };

/**
 * The hosted page is a capability URL (its token is in the address) showing data of one organization: it loads
 * nothing, runs no script, may not be framed, and its address is not sent on as a referrer. Its only style is the
 * inline `<style>` element; it has no image, font, form or link to another resource.
 */
const hostedPageHeaders = {
  ...noStore,
  'Content-Security-Policy':
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
};

/** `hosted_invoice_url` and `pdf_url`: public, opened with the signed token the URL carries. */
export const invoiceDocumentRoutes: ModuleHttpRoute[] = [
  {
    method: 'GET',
    path: '/billing/invoices/:id/hosted',
    async handler(deps, req) {
      const { invoice, organization } = await invoiceForLink(deps, req.params.id!, req.query.token);
      return {
        contentType: 'text/html; charset=utf-8',
        body: renderInvoiceHtml(invoice, organization),
        headers: hostedPageHeaders,
      };
    },
  },
  {
    method: 'GET',
    path: '/billing/invoices/:id/pdf',
    async handler(deps, req) {
      const { invoice, organization } = await invoiceForLink(deps, req.params.id!, req.query.token);
      return {
        contentType: 'application/pdf',
        body: await renderInvoicePdf(invoice, organization),
        headers: {
          ...noStore,
          'X-Content-Type-Options': 'nosniff',
          'Referrer-Policy': 'no-referrer',
          'Content-Disposition': `inline; filename="invoice-${invoice.number}.pdf"`,
        },
      };
    },
  },
];
