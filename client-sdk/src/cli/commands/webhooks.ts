import type { RouterInputs } from '@cloud-platform/client';
import { defineCommandGroup } from '../command-group.js';
import { fields, table } from '../output.js';

type Events = RouterInputs['webhooks']['create']['events'];
type DeliveryFilter = RouterInputs['webhooks']['deliveries'];

export default defineCommandGroup({
  name: 'webhooks',
  register(program, cli) {
    const webhooks = program.command('webhooks').description('webhook endpoints and their deliveries');

    webhooks
      .command('list')
      .description('list your webhooks')
      .action(async () => {
        const res = await cli.client().webhooks.list.query({});
        cli.print(res, () =>
          table(res.webhooks, {
            id: (w) => w.id,
            url: (w) => w.url,
            status: (w) => w.status,
            events: (w) => w.events.join(','),
            'last delivery': (w) => w.last_delivery,
          }),
        );
      });

    webhooks
      .command('create')
      .description('create a webhook; its signing secret is printed once')
      .argument('<url>', 'the https:// address that receives the events')
      .requiredOption(
        '--events <events>',
        'comma-separated event types (vpn.connected,hosting.deployment.failed,…)',
      )
      .option('--description <text>', 'a description')
      .action(async (url: string, o: { events: string; description?: string }) => {
        const res = await cli.client().webhooks.create.mutate({
          url,
          events: o.events.split(',').map((e) => e.trim()) as Events,
          ...(o.description ? { description: o.description } : {}),
        });
        const w = res.webhook;
        cli.print(res, () =>
          fields({ id: w.id, url: w.url, events: w.events.join(','), status: w.status, secret: w.secret }),
        );
      });

    webhooks
      .command('deliveries')
      .description('list a webhook’s deliveries, newest first')
      .argument('<id>', 'the webhook id')
      .option('--status <status>', 'success, failed or pending')
      .action(async (id: string, o: { status?: string }) => {
        const res = await cli.client().webhooks.deliveries.query({
          id,
          ...(o.status ? { status: o.status as DeliveryFilter['status'] } : {}),
        });
        cli.print(res, () =>
          table(res.deliveries, {
            id: (d) => d.id,
            event: (d) => d.event_type,
            status: (d) => d.status,
            attempts: (d) => d.attempts,
            response: (d) => d.response_status,
            'time ms': (d) => d.response_time_ms,
            created: (d) => d.created_at,
          }),
        );
      });

    webhooks
      .command('test')
      .description('send a test event to the webhook now')
      .argument('<id>', 'the webhook id')
      .option('--event <type>', 'the event type to send (default webhook.test)')
      .action(async (id: string, o: { event?: string }) => {
        const res = await cli.client().webhooks.test.mutate({
          id,
          ...(o.event ? { event_type: o.event as DeliveryFilter['event_type'] } : {}),
        });
        const d = res.delivery;
        cli.print(res, () =>
          fields({ delivery: d.id, status: d.status, response: d.response_status, error: d.error }),
        );
      });

    webhooks
      .command('delete')
      .description('delete a webhook')
      .argument('<id>', 'the webhook id')
      .action(async (id: string) => {
        const res = await cli.client().webhooks.delete.mutate({ id });
        cli.print(res, () => `Deleted ${id}.`);
      });
  },
});
