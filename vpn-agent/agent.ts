import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { generateWireguardKeyPair, wireguardPublicKey } from '../shared/wireguard-keys.js';
import { WireguardHost } from './wireguard-host.js';

/**
 * The VPN agent (docs/vpn-servers.md): holds the WireGuard interface of its host and talks to the API outbound only,
 * with its server token. Registers its public key; long-polls the peers it must hold and applies each change;
 * reports every peer's latest handshake and byte counters, and its load, every few seconds.
 */
export interface AgentOptions {
  api: string;
  token: string;
  iface: string;
  stateDir: string;
  netns?: string | undefined;
  userspace?: 'auto' | 'always' | 'never';
  /** Seconds between reports; the API's suggestion when absent. */
  reportIntervalSeconds?: number | undefined;
  /** Longest wait of one long poll, in seconds (the API caps it). */
  pollSeconds?: number;
  /** Delete the interface when the agent stops (its peers go with it). */
  downOnExit?: boolean;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

interface Registration {
  server_id: string;
  listen_port: number;
  address: string;
  report_interval_seconds: number;
  poll_max_seconds: number;
}

export class VpnAgent {
  readonly host: WireguardHost;
  private stopped = false;
  private abort = new AbortController();
  private loops: Promise<void>[] = [];
  private version: number | undefined;
  registration: Registration | undefined;

  constructor(private readonly opts: AgentOptions) {
    this.host = new WireguardHost(opts.iface, opts.netns, opts.userspace ?? 'auto');
  }

  private log(msg: string, fields: Record<string, unknown> = {}): void {
    (this.opts.log ?? ((m, f) => process.stderr.write(`${JSON.stringify({ msg: m, ...f })}\n`)))(msg, fields);
  }

  /** The host's private key file (made once, mode 0600 under umask 077) and its public key. */
  private privateKeyFile(): { file: string; publicKey: string } {
    const previous = process.umask(0o077);
    try {
      mkdirSync(this.opts.stateDir, { recursive: true, mode: 0o700 });
      const file = join(this.opts.stateDir, 'private.key');
      if (!existsSync(file)) {
        writeFileSync(file, `${generateWireguardKeyPair().privateKey}\n`, { mode: 0o600, flag: 'wx' });
      }
      return { file, publicKey: wireguardPublicKey(readFileSync(file, 'utf8').trim()) };
    } finally {
      process.umask(previous);
    }
  }

  private async call<T>(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    timeoutMs = 15_000,
  ): Promise<T> {
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(timeoutMs)]);
    const res = await fetch(new URL(`/v1${path}`, this.opts.api), {
      method,
      headers: {
        authorization: `Bearer ${this.opts.token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal,
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${text.slice(0, 300)}`);
    return JSON.parse(text) as T;
  }

  /** Registers, sets the interface up, then runs the peer and report loops until stop(). */
  async start(): Promise<void> {
    const key = this.privateKeyFile();
    for (let attempt = 0; ; attempt++) {
      try {
        this.registration = await this.call<Registration>('POST', '/agent/register', {
          public_key: key.publicKey,
        });
        break;
      } catch (err) {
        if (this.stopped) return;
        this.log('register failed; retrying', { error: String(err) });
        await this.sleep(Math.min(30_000, 1000 * 2 ** attempt));
      }
    }
    const reg = this.registration;
    const how = await this.host.ensureInterface();
    await this.host.configure(key.file, reg.listen_port, reg.address);
    this.log('registered', {
      server_id: reg.server_id,
      interface: this.opts.iface,
      how,
      port: reg.listen_port,
    });
    this.loops.push(this.peerLoop(), this.reportLoop());
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.abort.signal.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  private async peerLoop(): Promise<void> {
    const wait = Math.min(this.opts.pollSeconds ?? 25, this.registration!.poll_max_seconds);
    let failures = 0;
    while (!this.stopped) {
      try {
        const since = this.version === undefined ? '' : `since=${this.version}&`;
        const res = await this.call<{
          version: number;
          peers: { public_key: string; allowed_ips: string[] }[];
        }>('GET', `/agent/peers?${since}wait=${wait}`, undefined, (wait + 15) * 1000);
        if (res.version !== this.version) {
          const changed = await this.host.sync(new Map(res.peers.map((p) => [p.public_key, p.allowed_ips])));
          if (changed.added || changed.removed)
            this.log('peers applied', { version: res.version, ...changed });
          this.version = res.version;
        }
        failures = 0;
      } catch (err) {
        if (this.stopped) return;
        failures += 1;
        this.log('peer sync failed; retrying', { error: String(err) });
        await this.sleep(Math.min(30_000, 500 * 2 ** Math.min(failures, 6)));
      }
    }
  }

  /** One report now: every peer's handshake age and counters, and the host's load. */
  async report(): Promise<void> {
    const nowSec = Math.floor(Date.now() / 1000);
    const peers = await this.host.peers();
    const load = Math.min(100, Math.round((loadavg()[0]! / availableParallelism()) * 100));
    const res = await this.call<{ version: number }>('POST', '/agent/report', {
      load,
      peers: peers.map((p) => ({
        public_key: p.publicKey,
        handshake_age_seconds: p.latestHandshake > 0 ? Math.max(0, nowSec - p.latestHandshake) : null,
        rx_bytes: p.rxBytes,
        tx_bytes: p.txBytes,
      })),
    });
    // A change this process's long poll missed (it answered from another API process): fetch again at once.
    if (this.version !== undefined && res.version !== this.version) this.version = undefined;
  }

  private async reportLoop(): Promise<void> {
    const everyMs = (this.opts.reportIntervalSeconds ?? this.registration!.report_interval_seconds) * 1000;
    while (!this.stopped) {
      try {
        await this.report();
      } catch (err) {
        if (this.stopped) return;
        this.log('report failed', { error: String(err) });
      }
      await this.sleep(everyMs);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await Promise.allSettled(this.loops);
    if (this.opts.downOnExit) await this.host.remove().catch(() => undefined);
  }
}
