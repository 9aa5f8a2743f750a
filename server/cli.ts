import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from './config.js';
import { openDatabase, type Database } from './db/orm.js';
import { buildRegistry } from './kit/registry.js';
import { modules } from './modules.js';
import { AppError } from './lib/errors.js';
import { addServer, allServers, removeServer } from './modules/vpn/vpn-servers.service.js';
import { MikroOrmVpnRepository } from './modules/vpn/vpn.repository.js';
import type { TServer } from './modules/vpn/vpn.schema.js';

const USAGE = `Usage: npm run cli -- <command> [options]

Commands:
  servers:list [--json]
      The VPN server catalogue.
  servers:add --location <code> --city <name> --country <name> --country-code <CC>
              --protocols wireguard,openvpn --host <host> [--port 51820] [--openvpn-port 1194]
              [--status online|offline|maintenance] [--load 0-100] [--latency <ms>] [--json]
      Adds a server with a new WireGuard key pair; emits vpn.server.created to every organization.
  servers:remove <srv_id> [--json]
      Removes a server; its connecting/active connections go to error (active ones emit vpn.disconnected);
      emits vpn.server.deleted to every organization.

The database is the server's (DATABASE_URL, else the embedded one in DATA_DIR). The embedded database is
single-process: stop the server before running a command against it.`;

export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

const consoleIo: CliIo = {
  out: (l) => process.stdout.write(`${l}\n`),
  err: (l) => process.stderr.write(`${l}\n`),
};

function formatServer(s: TServer): string {
  return [
    s.id.padEnd(25),
    s.location.padEnd(13),
    `${s.city}, ${s.country_code}`.padEnd(22),
    s.protocols.join(',').padEnd(18),
    s.status.padEnd(12),
    [
      s.host,
      ...(s.protocols.includes('wireguard') ? [`wireguard:${s.port}`] : []),
      ...(s.protocols.includes('openvpn') ? [`openvpn:${s.openvpn_port}`] : []),
    ].join(' '),
  ].join(' ');
}

function intOption(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new AppError('VALIDATION_ERROR', `--${name} must be a whole number`);
  return Number(v);
}

/**
 * Runs one operator command. Returns the exit code. `db` lets tests run it on an open database; otherwise the
 * database is opened (and migrated) from the environment exactly as the server does, and closed at the end.
 */
export async function runCli(
  argv: string[],
  opts: { db?: Database; io?: CliIo; now?: () => Date; env?: Record<string, string | undefined> } = {},
): Promise<number> {
  const io = opts.io ?? consoleIo;
  const now = opts.now ?? (() => new Date());
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        location: { type: 'string' },
        city: { type: 'string' },
        country: { type: 'string' },
        'country-code': { type: 'string' },
        protocols: { type: 'string' },
        host: { type: 'string' },
        port: { type: 'string' },
        'openvpn-port': { type: 'string' },
        status: { type: 'string' },
        load: { type: 'string' },
        latency: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    io.err((err as Error).message);
    io.err(USAGE);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    (values.help ? io.out : io.err)(USAGE);
    return values.help ? 0 : 2;
  }
  if (!['servers:list', 'servers:add', 'servers:remove'].includes(command)) {
    io.err(`Unknown command ${command}`);
    io.err(USAGE);
    return 2;
  }

  let db = opts.db;
  const ownsDb = !db;
  try {
    if (!db) {
      const config = loadConfig(opts.env ?? process.env);
      const registry = buildRegistry(modules);
      db = await openDatabase({
        databaseUrl: config.databaseUrl,
        pgliteDataDir: resolve(config.dataDir, 'pglite'),
        entities: [...registry.entities],
        migrations: [...registry.migrations],
        poolMax: 2,
      });
    }
    const repo = new MikroOrmVpnRepository(db);
    const em = repo.fork();
    switch (command) {
      case 'servers:list': {
        const servers = await allServers(repo, em);
        if (values.json) io.out(JSON.stringify(servers, null, 2));
        else for (const s of servers) io.out(formatServer(s));
        return 0;
      }
      case 'servers:add': {
        const result = await addServer(
          repo,
          em,
          {
            location: values.location as never,
            city: values.city as string,
            country: values.country as string,
            country_code: values['country-code'] as string,
            protocols: (values.protocols ?? '')
              .split(',')
              .map((p) => p.trim())
              .filter(Boolean) as never,
            host: values.host as string,
            port: intOption('port', values.port),
            openvpn_port: intOption('openvpn-port', values['openvpn-port']),
            status: values.status as never,
            load: intOption('load', values.load),
            latency: intOption('latency', values.latency),
          },
          now(),
        );
        if (values.json) io.out(JSON.stringify(result.server, null, 2));
        else {
          io.out(formatServer(result.server));
          io.out(`Added ${result.server.id}; vpn.server.created recorded for every organization.`);
        }
        return 0;
      }
      case 'servers:remove': {
        const id = rest[0];
        if (!id) {
          io.err('servers:remove needs a server id (srv_...)');
          return 2;
        }
        const result = await removeServer(repo, em, id, now());
        if (values.json) io.out(JSON.stringify(result, null, 2));
        else {
          io.out(
            `Removed ${result.server.id} (${result.server.city}); ${result.connectionsAffected} connection(s) ` +
              'moved to error; vpn.server.deleted recorded for every organization.',
          );
        }
        return 0;
      }
    }
    return 2;
  } catch (err) {
    if (err instanceof ConfigError) {
      io.err(err.message);
      return 1;
    }
    if (err instanceof AppError) {
      io.err(`${err.code}: ${err.message}`);
      return 1;
    }
    if (err && typeof err === 'object' && 'issues' in err) {
      for (const issue of (err as { issues: { path: PropertyKey[]; message: string }[] }).issues) {
        const flag = String(issue.path[0] ?? '').replace(/_/g, '-');
        io.err(`--${flag}: ${issue.message}`);
      }
      return 1;
    }
    throw err;
  } finally {
    if (ownsDb && db) await db.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = await runCli(process.argv.slice(2));
}
