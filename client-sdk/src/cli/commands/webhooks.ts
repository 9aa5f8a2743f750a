import type { RouterInputs, RouterOutputs } from '@cloud-platform/client';
import { positiveInteger, timeOption } from '../cli.js';
import { defineCommandGroup, documented } from '../command-group.js';
import { CliError, EXIT } from '../exit-codes.js';
import { fields, table } from '../output.js';

type Events = RouterInputs['webhooks']['create']['events'];
type DeliveryFilter = RouterInputs['webhooks']['deliveries'];
type Webhook = RouterOutputs['webhooks']['get']['webhook'];

const eventList = (events: string) =>
  events
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean) as Events;

const webhookFields = (w: Webhook) =>
  fields({
    id: w.id,
    url: w.url,
    status: w.status,
    events: w.events.join(','),
    description: w.description,
    secret: w.secret,
    'previous secret until': w.previous_secret_expires_at,
    deliveries: `${w.delivery_stats.total_deliveries} (${w.delivery_stats.successful_deliveries} ok, ${w.delivery_stats.failed_deliveries} failed)`,
    'last delivery': w.last_delivery,
  });

/** A secret printed by create or rotate-secret: said once and plainly (docs/cli.md, "Secrets"). */
const secretNote =
  'The signing secret is shown only now: store it where your receiver verifies signatures. ' +
  'A new one: cloud webhooks rotate-secret <id>';

export default defineCommandGroup({
  name: 'webhooks',
  register(program, cli) {
    const webhooks = program.command('webhooks').description('webhook endpoints and their deliveries');

    documented(webhooks.command('list'), {
      calls: ['webhooksList'],
      examples: ['cloud webhooks list'],
    })
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

    documented(webhooks.command('create'), {
      calls: ['webhooksCreate'],
      examples: [
        'cloud webhooks create https://hooks.acme.dev/cloud --events vpn.connected,hosting.deployment.failed',
      ],
    })
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
          events: eventList(o.events),
          ...(o.description ? { description: o.description } : {}),
        });
        const w = res.webhook;
        cli.print(res, () =>
          [
            fields({ id: w.id, url: w.url, events: w.events.join(','), status: w.status, secret: w.secret }),
            '',
            secretNote,
          ].join('\n'),
        );
      });

    documented(webhooks.command('deliveries'), {
      calls: ['webhooksDeliveries'],
      examples: ['cloud webhooks deliveries wh_abc123 --status failed'],
    })
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

    documented(webhooks.command('test'), {
      calls: ['webhooksTest'],
      examples: ['cloud webhooks test wh_abc123'],
    })
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

    documented(webhooks.command('delete'), {
      calls: ['webhooksDelete'],
      examples: ['cloud webhooks delete wh_abc123'],
    })
      .description('delete a webhook')
      .argument('<id>', 'the webhook id')
      .action(async (id: string) => {
        const res = await cli.client().webhooks.delete.mutate({ id });
        cli.print(res, () => `Deleted ${id}.`);
      });

    documented(webhooks.command('show'), {
      calls: ['webhooksGet'],
      examples: ['cloud webhooks show wh_abc123'],
    })
      .description('show a webhook and its delivery statistics (the secret masked)')
      .argument('<id>', 'the webhook id')
      .action(async (id: string) => {
        const res = await cli.client().webhooks.get.query({ id });
        cli.print(res, () => webhookFields(res.webhook));
      });

    documented(webhooks.command('update'), {
      calls: ['webhooksUpdate'],
      examples: [
        'cloud webhooks update wh_abc123 --events vpn.connected,vpn.disconnected',
        'cloud webhooks update wh_abc123 --pause',
        'cloud webhooks update wh_abc123 --resume',
      ],
    })
      .description('change a webhook: address, events, description; pause or resume it')
      .argument('<id>', 'the webhook id')
      .option('--url <url>', 'a new https:// address')
      .option('--events <events>', 'the new comma-separated event types (replaces them)')
      .option('--description <text>', 'a new description')
      .option('--pause', 'stop sending events (inactive)')
      .option('--resume', 'send events again (also after a 410 disabled it)')
      .action(
        async (
          id: string,
          o: { url?: string; events?: string; description?: string; pause?: boolean; resume?: boolean },
        ) => {
          if (o.pause && o.resume) throw new CliError('give --pause or --resume, not both', EXIT.USAGE);
          const input = {
            id,
            ...(o.url ? { url: o.url } : {}),
            ...(o.events ? { events: eventList(o.events) } : {}),
            ...(o.description !== undefined ? { description: o.description } : {}),
            ...(o.pause ? { active: false } : o.resume ? { active: true } : {}),
          };
          if (Object.keys(input).length === 1) {
            throw new CliError('nothing to change: give at least one option (see --help)', EXIT.USAGE);
          }
          const res = await cli.client().webhooks.update.mutate(input);
          cli.print(res, () => webhookFields(res.webhook));
        },
      );

    documented(webhooks.command('redeliver'), {
      calls: ['webhooksRedeliver'],
      examples: ['cloud webhooks redeliver wh_abc123 del_abc123'],
    })
      .description('send a delivery’s event again, as a new delivery (same event id and body)')
      .argument('<id>', 'the webhook id')
      .argument('<delivery>', 'the delivery id (del_…), see `cloud webhooks deliveries <id>`')
      .action(async (id: string, deliveryId: string) => {
        const res = await cli.client().webhooks.redeliver.mutate({ id, delivery_id: deliveryId });
        const d = res.delivery;
        cli.print(res, () =>
          fields({ delivery: d.id, 'redelivery of': d.redelivery_of, event: d.event_type, status: d.status }),
        );
      });

    documented(webhooks.command('recover'), {
      calls: ['webhooksRecover'],
      examples: [
        'cloud webhooks recover wh_abc123 --since 2026-11-20T00:00:00Z',
        'cloud webhooks recover wh_abc123 --since 3d --until 1d',
      ],
    })
      .description('send again every failed delivery of a time window (at most 30 days back)')
      .argument('<id>', 'the webhook id')
      .requiredOption('--since <time>', 'start of the window: ISO 8601, or 90m, 12h, 3d ago', timeOption)
      .option('--until <time>', 'end of the window (default now)', timeOption)
      .action(async (id: string, o: { since: string; until?: string }) => {
        const res = await cli
          .client()
          .webhooks.recover.mutate({ id, since: o.since, ...(o.until ? { until: o.until } : {}) });
        cli.print(res, () => `${res.deliveries_queued} failed deliveries queued again.`);
      });

    documented(webhooks.command('rotate-secret'), {
      calls: ['webhooksRotateSecret'],
      examples: [
        'cloud webhooks rotate-secret wh_abc123',
        'cloud webhooks rotate-secret wh_abc123 --overlap-hours 0',
      ],
    })
      .description('replace the signing secret; the old one keeps signing beside it for --overlap-hours')
      .argument('<id>', 'the webhook id')
      .option(
        '--overlap-hours <hours>',
        'hours the replaced secret still signs, 0 to 168 (default 24)',
        (v: string) => (v === '0' ? 0 : positiveInteger(v)),
      )
      .action(async (id: string, o: { overlapHours?: number }) => {
        const res = await cli.client().webhooks.rotateSecret.mutate({
          id,
          ...(o.overlapHours !== undefined ? { expires_in_hours: o.overlapHours } : {}),
        });
        cli.print(res, () =>
          [
            fields({
              id: res.webhook.id,
              secret: res.secret,
              'previous secret until': res.webhook.previous_secret_expires_at,
            }),
            '',
            secretNote,
          ].join('\n'),
        );
      });
  },
});
