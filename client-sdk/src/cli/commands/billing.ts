import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { PlatformApiError, type RouterInputs, type RouterOutputs } from '@cloud-platform/client';
import { defineCommandGroup, documented } from '../command-group.js';
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

    documented(billing.command('plans'), {
      calls: ['billingPlansList'],
      examples: ['cloud billing plans'],
    })
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

    documented(billing.command('plan'), {
      calls: ['billingSubscriptionGet'],
      examples: ['cloud billing plan'],
    })
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

    documented(billing.command('change'), {
      calls: ['billingSubscriptionPreview', 'billingSubscriptionUpdate'],
      examples: ['cloud billing change pro', 'cloud billing change starter --proration none --yes'],
    })
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

    documented(billing.command('card-add'), {
      calls: ['billingPaymentMethodsCreate'],
      examples: ['cloud billing card-add pm_card_visa --default'],
    })
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

    documented(billing.command('invoices'), {
      calls: ['billingInvoicesList'],
      examples: ['cloud billing invoices --status open'],
    })
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

    documented(billing.command('invoice'), {
      calls: ['billingInvoicesGet'],
      examples: ['cloud billing invoice inv_abc123'],
    })
      .description('show an invoice and its lines')
      .argument('<id>', 'the invoice id (in_…)')
      .action(async (id: string) => {
        const res = await cli.client().billing.invoices.get.query({ id });
        cli.print(res, () => invoiceText(res.invoice));
      });

    documented(billing.command('download'), {
      calls: ['billingInvoicesGet'],
      examples: ['cloud billing download inv_abc123 -o invoice.pdf'],
    })
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

    documented(billing.command('preview'), {
      calls: ['billingSubscriptionPreview'],
      examples: ['cloud billing preview pro', 'cloud billing preview starter --proration none'],
    })
      .description('show the invoice a plan change would issue, without changing anything')
      .argument('<plan>', 'starter, pro or enterprise')
      .option('--proration <behavior>', 'always_invoice (default), create_prorations or none')
      .action(async (plan: string, o: { proration?: string }) => {
        const res = await cli.client().billing.subscription.preview.mutate({
          plan: plan as NonNullable<UpdateInput['plan']>,
          ...(o.proration ? { proration_behavior: o.proration as UpdateInput['proration_behavior'] } : {}),
        });
        cli.print(res, () => `${previewText(res.invoice)}\nChange with: cloud billing change ${plan}`);
      });

    documented(billing.command('cancel'), {
      calls: ['billingSubscriptionUpdate'],
      examples: ['cloud billing cancel --yes', 'cloud billing cancel --undo'],
    })
      .description('end the subscription at the end of the period (no renewal); --undo keeps it')
      .option('--undo', 'renew it after all')
      .option('--yes', 'do not ask (required when not on a terminal)')
      .action(async (o: { undo?: boolean; yes?: boolean }) => {
        if (!o.undo) {
          await cli.confirm(
            'End the subscription at the end of the period? Nothing new can be created after it.',
            o.yes,
            'canceling the subscription',
          );
        }
        const res = await cli.client().billing.subscription.update.mutate({ cancel_at_period_end: !o.undo });
        cli.print(res, () =>
          res.subscription.cancel_at_period_end
            ? `The subscription ends on ${res.subscription.current_period_end}.`
            : 'The subscription renews at the end of the period.',
        );
      });

    documented(billing.command('usage'), {
      calls: ['billingUsageGet'],
      examples: ['cloud billing usage'],
    })
      .description('what the organization used this period, and what it costs so far')
      .action(async () => {
        const res = await cli.client().billing.usage.get.query();
        const rows = Object.entries(res.usage).flatMap(([area, measures]) =>
          Object.entries(measures).map(([measure, value]) => ({ measure: `${area}.${measure}`, value })),
        );
        cli.print(res, () =>
          [
            `Period ${res.current_period.start} → ${res.current_period.end}`,
            table(rows, { measure: (r) => r.measure, value: (r) => r.value }),
            '',
            fields({
              'base plan': money(res.costs.base_plan),
              'add-ons': money(res.costs.add_ons),
              total: money(res.costs.total),
            }),
          ].join('\n'),
        );
      });

    documented(billing.command('cards'), {
      calls: ['billingPaymentMethodsList'],
      examples: ['cloud billing cards'],
    })
      .description('list the cards of the organization')
      .action(async () => {
        const res = await cli.client().billing.paymentMethods.list.query();
        cli.print(res, () =>
          table(res.payment_methods, {
            id: (pm) => pm.id,
            card: (pm) => `${pm.card.brand} ${pm.card.last4}`,
            expires: (pm) => `${pm.card.exp_month}/${pm.card.exp_year}`,
            default: (pm) => (pm.is_default ? 'yes' : ''),
          }),
        );
      });

    documented(billing.command('card-remove'), {
      calls: ['billingPaymentMethodsDelete'],
      examples: ['cloud billing card-remove pm_abc123'],
    })
      .description('remove a card')
      .argument('<id>', 'the payment method id (pm_…)')
      .action(async (id: string) => {
        const res = await cli.client().billing.paymentMethods.delete.mutate({ id });
        cli.print(res, () => `Removed ${res.id}.`);
      });

    documented(billing.command('pay'), {
      calls: ['billingInvoicesPay'],
      examples: ['cloud billing pay inv_abc123', 'cloud billing pay inv_abc123 --card pm_abc123'],
    })
      .description('pay an open invoice now, with the default card or another one')
      .argument('<id>', 'the invoice id (inv_…)')
      .option('--card <pm>', 'charge this card (pm_…) for this payment only')
      .action(async (id: string, o: { card?: string }) => {
        const res = await cli
          .client()
          .billing.invoices.pay.mutate({ id, ...(o.card ? { payment_method: o.card } : {}) });
        cli.print(
          res,
          () => `Invoice ${res.invoice.number}: ${money(res.invoice.total)}, ${res.invoice.status}.`,
        );
      });
  },
});
