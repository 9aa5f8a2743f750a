import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { RouterInputs } from '@cloud-platform/client';
import { positiveInteger } from '../cli.js';
import { defineCommandGroup } from '../command-group.js';
import { fields, table } from '../output.js';

type CreateInput = RouterInputs['vpn']['connections']['create'];

interface CreateOptions {
  location: string;
  protocol: string;
  autoConnect?: boolean;
  configFile?: string;
  wait?: boolean;
  timeout?: number;
}

export default defineCommandGroup({
  name: 'vpn',
  register(program, cli) {
    const vpn = program.command('vpn').description('VPN connections');

    vpn
      .command('list')
      .description('list your VPN connections')
      .action(async () => {
        const res = await cli.client().vpn.connections.list.query({});
        cli.print(res, () =>
          table(res.connections, {
            id: (c) => c.id,
            name: (c) => c.name,
            status: (c) => c.status,
            location: (c) => c.location,
            protocol: (c) => c.protocol,
            created: (c) => c.created_at,
          }),
        );
      });

    vpn
      .command('create')
      .description('create a connection; a WireGuard one writes its wg-quick configuration (shown only once)')
      .argument('<name>', 'a name for the connection')
      .requiredOption(
        '--location <location>',
        'us-east, us-west, ca-central, sa-east, eu-west, eu-central, ...',
      )
      .option('--protocol <protocol>', 'wireguard or openvpn', 'wireguard')
      .option('--auto-connect', 'connect automatically')
      .option('--config-file <path>', 'where to write the wg-quick file (default: ./<name>.conf)')
      .option('--wait', 'wait until the connection is active')
      .option('--timeout <seconds>', 'how long --wait waits', positiveInteger, 600)
      .action(async (name: string, options: CreateOptions) => {
        const client = cli.client();
        const res = await client.vpn.connections.create.mutate({
          name,
          location: options.location as CreateInput['location'],
          protocol: options.protocol as CreateInput['protocol'],
          ...(options.autoConnect ? { auto_connect: true } : {}),
        });
        let connection = res.connection;
        let configFile: string | null = null;
        if (connection.config.wg_quick) {
          configFile = resolve(options.configFile ?? `${name.replace(/[^A-Za-z0-9._-]+/g, '-')}.conf`);
          // It holds the private key: readable by its owner only.
          writeFileSync(configFile, connection.config.wg_quick, { mode: 0o600 });
        }
        if (options.wait) {
          const final = await cli.waitFor({
            poll: () => client.vpn.connections.get.query({ id: connection.id }),
            describe: (s) => `connection ${connection.id} is ${s.connection.status}`,
            done: (s) => s.connection.status === 'active' || s.connection.status === 'error',
            timeoutSeconds: options.timeout,
          });
          connection = { ...connection, ...final.connection, config: connection.config };
        }
        cli.print({ ...res, connection, config_file: configFile }, () =>
          [
            fields({
              id: connection.id,
              name: connection.name,
              status: connection.status,
              location: connection.location,
              protocol: connection.protocol,
              endpoint: connection.config.endpoint,
              address: connection.config.address,
            }),
            configFile
              ? `WireGuard configuration written to ${configFile} (it is shown only once: keep it safe)\n` +
                `Connect with: sudo wg-quick up ${configFile}`
              : '',
          ]
            .filter(Boolean)
            .join('\n'),
        );
      });

    vpn
      .command('show')
      .description('show a connection')
      .argument('<id>', 'the connection id (vpn_…)')
      .action(async (id: string) => {
        const res = await cli.client().vpn.connections.get.query({ id });
        const c = res.connection;
        cli.print(res, () =>
          fields({
            id: c.id,
            name: c.name,
            status: c.status,
            message: c.status_message,
            location: c.location,
            protocol: c.protocol,
            endpoint: c.config.endpoint,
            address: c.config.address,
            uptime: c.stats.uptime,
            upload: c.data_usage.upload,
            download: c.data_usage.download,
            created: c.created_at,
          }),
        );
      });

    vpn
      .command('delete')
      .description('delete a connection')
      .argument('<id>', 'the connection id')
      .action(async (id: string) => {
        const res = await cli.client().vpn.connections.delete.mutate({ id });
        cli.print(res, () => `Deleted ${id}.`);
      });
  },
});
