// `npm run vpn-agent -- --api URL --token-file FILE --interface wg0 [options]`: the VPN agent of a real server
// (docs/vpn-servers.md). Runs until SIGINT/SIGTERM.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { VpnAgent } from './agent.js';

const USAGE = `Usage: npm run vpn-agent -- --api URL --token-file FILE [options]
  --api URL               the API's base URL (https://api.example.com)
  --token-file FILE       file holding the server token (vst_…) from POST /v1/vpn/servers
  --interface NAME        WireGuard interface to hold (default wg0)
  --state-dir DIR         where the server's private key is kept, mode 0600 (default /var/lib/vpn-agent)
  --userspace MODE        auto (kernel WireGuard, else wireguard-go), always, never (default auto)
  --report-interval SEC   seconds between reports (default: the API's, 10)
  --netns NAME            hold the interface inside this network namespace
  --down-on-exit          delete the interface (and its peers) when the agent stops`;

const { values } = parseArgs({
  options: {
    api: { type: 'string' },
    'token-file': { type: 'string' },
    interface: { type: 'string', default: 'wg0' },
    'state-dir': { type: 'string', default: '/var/lib/vpn-agent' },
    userspace: { type: 'string', default: 'auto' },
    'report-interval': { type: 'string' },
    netns: { type: 'string' },
    'down-on-exit': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});

if (values.help || !values.api || !values['token-file']) {
  process.stderr.write(`${USAGE}\n`);
  process.exit(values.help ? 0 : 2);
}
const userspace = values.userspace;
if (userspace !== 'auto' && userspace !== 'always' && userspace !== 'never') {
  process.stderr.write('--userspace must be auto, always or never\n');
  process.exit(2);
}
const interval = values['report-interval'] === undefined ? undefined : Number(values['report-interval']);
if (interval !== undefined && !(interval > 0 && interval <= 3600)) {
  process.stderr.write('--report-interval must be 0 < seconds <= 3600\n');
  process.exit(2);
}

const agent = new VpnAgent({
  api: values.api,
  // The token is read from its file, never taken from the command line.
  token: readFileSync(values['token-file'], 'utf8').trim(),
  iface: values.interface,
  stateDir: values['state-dir'],
  netns: values.netns,
  userspace,
  reportIntervalSeconds: interval,
  downOnExit: values['down-on-exit'],
});

let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    void agent.stop().then(() => process.exit(0));
  });
}
agent.start().catch((err: unknown) => {
  process.stderr.write(`${JSON.stringify({ msg: 'agent failed to start', error: String(err) })}\n`);
  process.exit(1);
});
