import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { PlatformApiError, type RouterInputs, type RouterOutputs } from '@cloud-platform/client';
import { defineCommandGroup } from '../command-group.js';
import { CliError, EXIT } from '../exit-codes.js';
import { ask, fields, money, table } from '../output.js';

type UpdateInput = RouterInputs['billing']['subscription']['update'];
type InvoiceStatus = NonNullable<
  Exclude<RouterInputs['billing']['invoices']['list'], void | undefined>['status']
>;
type Invoice = RouterOutputs['billing']['invoices']['get']['invoice'];

const invoiceText = (invoice: Invoice) =>
  [
    fields({
      invoice: invoice.id,
      number: invoice.number,
      status: invoice.status,
      total: money(invoice.total),
      created: invoice.created,
      paid: invoice.paid_at,
    }),
    '',
    table(invoice.line_items, {
      description: (l) => l.description,
      quantity: (l) => l.quantity,
      amount: (l) => money(l.amount),
    }),
  ].join('\n');

/** The invoice a plan change would issue: its lines and what would be charged. */
const previewText = (invoice: Invoice) =>
  [
    table(invoice.line_items, {
      description: (l) => l.description,
      quantity: (l) => l.quantity,
      amount: (l) => money(l.amount),
    }),
    invoice.tax.amount
      ? `Tax (${invoice.tax.jurisdiction} ${invoice.tax.rate}%): ${money(invoice.tax.amount)}`
      : '',
    `Total: ${money(invoice.total)}`,
  ]
    .filter(Boolean)
    .join('\n');

/**
 * Fetches the invoice's PDF. `pdf_url` is a signed link under the API's public address; its path and query are
 * requested from the API this CLI talks to (the same server, whatever address it calls itself by).
 */
async function downloadPdf(apiUrl: string, pdfUrl: string): Promise<Uint8Array> {
  const signed = new URL(pdfUrl);
  const url = new URL(`${signed.pathname}${signed.search}`, apiUrl);
  let res: Response;
  try {
    res = await fetch(url);
  } catch (cause) {
    throw new PlatformApiError({
      code: 'CONNECTION_ERROR',
      message: 'Could not reach the API',
      status: 0,
      cause,
    });
  }
  if (!res.ok || res.headers.get('content-type') !== 'application/pdf') {
    const body = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
    throw new PlatformApiError({
      code: body.error?.code ?? 'HTTP_ERROR',
      message: body.error?.message ?? `the PDF could not be downloaded (HTTP ${res.status})`,
      status: res.status,
      requestId: res.headers.get('x-request-id') ?? undefined,
    });
  }
  return new Uint8Array(await res.arrayBuffer());
}

export default defineCommandGroup({
  name: 'billing',
  register(program, cli) {
    const billing = program.command('billing').description('plan, subscription, cards and invoices');

    billing
      .command('plans')
      .description('list the plans and their limits')
      .action(async () => {
        const res = await cli.client().billing.plans.list.query();
        cli.print(res, () =>
          table(res.plans, {
            plan: (p) => p.id,
            price: (p) => `${money(p.price)}/${p.interval}`,
            popular: (p) => (p.popular ? 'yes' : ''),
          }),
        );
      });

    billing
      .command('plan')
      .description('show the subscription, its plan and the usage against its limits')
      .action(async () => {
        const res = await cli.client().billing.subscription.get.query();
        const s = res.subscription;
        const usage = Object.entries(res.usage).map(([resource, u]) => ({ resource, ...u }));
        cli.print(res, () =>
          [
            fields({
              plan: s.plan,
              status: s.status,
              period: `${s.current_period_start} → ${s.current_period_end}`,
              'cancel at period end': s.cancel_at_period_end ? 'yes' : 'no',
              card: s.default_payment_method,
              credit: money(s.credit_balance),
            }),
            '',
            table(usage, {
              resource: (u) => u.resource,
              used: (u) => u.current,
              limit: (u) => (u.unlimited ? 'unlimited' : u.limit),
            }),
          ].join('\n'),
        );
      });

    billing
      .command('change')
      .description('change the plan: shows the invoice it would issue, then asks before charging')
      .argument('<plan>', 'starter, pro or enterprise')
      .option('--yes', 'do not ask (required when not on a terminal)')
      .option('--proration <behavior>', 'always_invoice (default), create_prorations or none')
      .action(async (plan: string, o: { yes?: boolean; proration?: string }) => {
        const client = cli.client();
        const input = {
          plan: plan as NonNullable<UpdateInput['plan']>,
          ...(o.proration ? { proration_behavior: o.proration as UpdateInput['proration_behavior'] } : {}),
        };
        const preview = await client.billing.subscription.preview.mutate(input);
        if (!o.yes) {
          if (!process.stdin.isTTY) {
            throw new CliError('changing the plan needs a confirmation: pass --yes', EXIT.USAGE);
          }
          cli.note(`${previewText(preview.invoice)}\n`);
          const total = preview.invoice.total;
          const effect =
            total > 0
              ? `charge ${money(total)} now`
              : total < 0
                ? `credit ${money(-total)} to the next invoices`
                : 'charge nothing now';
          const answer = await ask(`Change to ${plan} and ${effect}? [y/N] `);
          if (!/^y(es)?$/i.test(answer)) throw new CliError('not changed', EXIT.FAILURE);
        }
        const res = await client.billing.subscription.update.mutate(input);
        cli.print({ ...res, preview: preview.invoice }, () =>
          [
            `Plan changed to ${res.subscription.plan}.`,
            res.invoice
              ? `Invoice ${res.invoice.number}: ${money(res.invoice.total)}, ${res.invoice.status}.`
              : '',
          ]
            .filter(Boolean)
            .join('\n'),
        );
      });

    billing
      .command('card-add')
      .description('add a card by its payment-method token (pm_…)')
      .argument('<token>', 'the token from the card form (test mode: pm_card_visa, …)')
      .option('--default', 'make it the default card')
      .action(async (token: string, o: { default?: boolean }) => {
        const res = await cli.client().billing.paymentMethods.create.mutate({
          payment_method: token,
          ...(o.default ? { set_as_default: true } : {}),
        });
        const pm = res.payment_method;
        cli.print(res, () => `Added ${pm.card.brand} ${pm.card.last4} (${pm.id}).`);
      });

    billing
      .command('invoices')
      .description('list the invoices, newest first')
      .option('--status <status>', 'open, paid, void or uncollectible')
      .action(async (o: { status?: string }) => {
        const res = await cli
          .client()
          .billing.invoices.list.query(o.status ? { status: o.status as InvoiceStatus } : {});
        cli.print(res, () =>
          table(res.invoices, {
            id: (i) => i.id,
            number: (i) => i.number,
            status: (i) => i.status,
            total: (i) => money(i.total),
            created: (i) => i.created,
          }),
        );
      });

    billing
      .command('invoice')
      .description('show an invoice and its lines')
      .argument('<id>', 'the invoice id (in_…)')
      .action(async (id: string) => {
        const res = await cli.client().billing.invoices.get.query({ id });
        cli.print(res, () => invoiceText(res.invoice));
      });

    billing
      .command('download')
      .description('download an invoice as PDF')
      .argument('<id>', 'the invoice id (in_…)')
      .option('-o, --output <file>', 'where to write it (default: ./<number>.pdf)')
      .action(async (id: string, o: { output?: string }) => {
        const { invoice } = await cli.client().billing.invoices.get.query({ id });
        if (!invoice.pdf_url) throw new CliError(`invoice ${id} has no PDF`, EXIT.REFUSED);
        const pdf = await downloadPdf(cli.apiUrl(), invoice.pdf_url);
        const file = resolve(o.output ?? `${invoice.number ?? invoice.id}.pdf`);
        writeFileSync(file, pdf);
        cli.print(
          { invoice: invoice.id, file, bytes: pdf.byteLength },
          () => `Saved ${file} (${pdf.byteLength} bytes).`,
        );
      });
  },
});
