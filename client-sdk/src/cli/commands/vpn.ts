import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { RouterInputs } from '@cloud-platform/client';
import { positiveInteger } from '../cli.js';
import { CliError, EXIT } from '../exit-codes.js';
import { defineCommandGroup, documented } from '../command-group.js';
import { fields, table } from '../output.js';

type CreateInput = RouterInputs['vpn']['connections']['create'];
type ServerInput = RouterInputs['vpn']['servers']['create'];
type ServerFilter = NonNullable<Exclude<RouterInputs['vpn']['servers']['list'], void>>;

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

    documented(vpn.command('list'), {
      calls: ['vpnConnectionsList'],
      examples: ['cloud vpn list'],
    })
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

    documented(vpn.command('create'), {
      calls: ['vpnConnectionsCreate', 'vpnConnectionsGet'],
      examples: ['cloud vpn create office --location eu-west --wait'],
    })
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

    documented(vpn.command('show'), {
      calls: ['vpnConnectionsGet'],
      examples: ['cloud vpn show vpn_abc123'],
    })
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

    documented(vpn.command('delete'), {
      calls: ['vpnConnectionsDelete'],
      examples: ['cloud vpn delete vpn_abc123'],
    })
      .description('delete a connection')
      .argument('<id>', 'the connection id')
      .action(async (id: string) => {
        const res = await cli.client().vpn.connections.delete.mutate({ id });
        cli.print(res, () => `Deleted ${id}.`);
      });

    documented(vpn.command('update'), {
      calls: ['vpnConnectionsUpdate'],
      examples: [
        'cloud vpn update vpn_abc123 --disconnect',
        'cloud vpn update vpn_abc123 --connect',
        'cloud vpn update vpn_abc123 --name laptop --no-auto-connect',
      ],
    })
      .description('rename a connection, change auto-connect, disconnect or reconnect it')
      .argument('<id>', 'the connection id (vpn_…)')
      .option('--name <name>', 'a new name')
      .option('--auto-connect', 'connect automatically')
      .option('--no-auto-connect', 'do not connect automatically')
      .option('--disconnect', 'make it inactive')
      .option('--connect', 'reconnect an inactive or failed connection')
      .action(
        async (
          id: string,
          o: { name?: string; autoConnect?: boolean; disconnect?: boolean; connect?: boolean },
        ) => {
          if (o.disconnect && o.connect)
            throw new CliError('give --connect or --disconnect, not both', EXIT.USAGE);
          const input = {
            id,
            ...(o.name ? { name: o.name } : {}),
            ...(o.autoConnect !== undefined ? { auto_connect: o.autoConnect } : {}),
            ...(o.disconnect
              ? { status: 'inactive' as const }
              : o.connect
                ? { status: 'active' as const }
                : {}),
          };
          if (Object.keys(input).length === 1) {
            throw new CliError('nothing to change: give at least one option (see --help)', EXIT.USAGE);
          }
          const res = await cli.client().vpn.connections.update.mutate(input);
          const c = res.connection;
          cli.print(res, () =>
            fields({
              id: c.id,
              name: c.name,
              status: c.status,
              'auto connect': c.auto_connect ? 'yes' : 'no',
            }),
          );
        },
      );

    const servers = vpn
      .command('servers')
      .description('the VPN server catalogue, and your own servers running the VPN agent (owner)');

    documented(servers.command('list'), {
      calls: ['vpnServersList'],
      examples: ['cloud vpn servers list --location eu-west'],
    })
      .description('list the servers by location')
      .option('--location <location>', 'only servers at this location')
      .option('--protocol <protocol>', 'only servers supporting wireguard or openvpn')
      .action(async (o: { location?: string; protocol?: string }) => {
        const res = await cli.client().vpn.servers.list.query({
          ...(o.location ? { location: o.location as ServerFilter['location'] } : {}),
          ...(o.protocol ? { protocol: o.protocol as ServerFilter['protocol'] } : {}),
        });
        cli.print(res, () =>
          table(res.servers, {
            id: (s) => s.id,
            location: (s) => s.location,
            city: (s) => `${s.city}, ${s.country_code}`,
            kind: (s) => s.kind,
            status: (s) => s.status,
            load: (s) => `${s.load}%`,
            endpoint: (s) => `${s.host}:${s.port}`,
          }),
        );
      });

    documented(servers.command('add'), {
      calls: ['vpnServersCreate'],
      examples: [
        'cloud vpn servers add --location eu-west --city Paris --country France --country-code FR --host vpn1.acme.dev',
      ],
    })
      .description('add a server of your own; prints the token its VPN agent signs in with, once (owner)')
      .requiredOption('--location <location>', 'the location code it is listed under (eu-west, …)')
      .requiredOption('--city <city>', 'its city')
      .requiredOption('--country <country>', 'its country')
      .requiredOption('--country-code <CC>', 'ISO 3166-1 alpha-2 code')
      .requiredOption('--host <host>', 'the public host name or IPv4 address clients reach')
      .option('--port <port>', 'the WireGuard (UDP) port (default 51820)', positiveInteger)
      .action(
        async (o: {
          location: string;
          city: string;
          country: string;
          countryCode: string;
          host: string;
          port?: number;
        }) => {
          const res = await cli.client().vpn.servers.create.mutate({
            location: o.location as ServerInput['location'],
            city: o.city,
            country: o.country,
            country_code: o.countryCode,
            host: o.host,
            ...(o.port !== undefined ? { port: o.port } : {}),
          });
          cli.print(res, () =>
            [
              fields({
                id: res.server.id,
                location: res.server.location,
                host: res.server.host,
                token: res.token,
              }),
              '',
              'The token is shown only now: give it to the VPN agent on that host (docs/vpn-servers.md).',
            ].join('\n'),
          );
        },
      );

    documented(servers.command('remove'), {
      calls: ['vpnServersDelete'],
      examples: ['cloud vpn servers remove srv_abc123 --yes'],
    })
      .description('remove a server of your own; its connections go to error (owner; asks first)')
      .argument('<id>', 'the server id (srv_…)')
      .option('--yes', 'do not ask (required when not on a terminal)')
      .action(async (id: string, o: { yes?: boolean }) => {
        await cli.confirm(
          `Remove the server ${id}? Its connections stop working.`,
          o.yes,
          'removing a VPN server',
        );
        const res = await cli.client().vpn.servers.delete.mutate({ id });
        cli.print(res, () => `Removed ${res.id}.`);
      });
  },
});
