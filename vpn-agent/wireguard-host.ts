import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** One peer as `wg show <if> dump` prints it. */
export interface HostPeer {
  publicKey: string;
  allowedIps: string[];
  /** Unix seconds of the latest handshake; 0 when none. */
  latestHandshake: number;
  rxBytes: number;
  txBytes: number;
}

/**
 * The WireGuard interface of the host, through `ip` and `wg` (wireguard-tools). Kernel WireGuard where the kernel
 * has it, else `wireguard-go` (userspace). Keys only ever go to `wg` as files; public keys and addresses are the
 * only values on a command line.
 */
export class WireguardHost {
  constructor(
    readonly iface: string,
    /** Run every command inside this network namespace (`ip netns exec NS …`), for a host of namespaces. */
    readonly netns: string | undefined,
    readonly userspace: 'auto' | 'always' | 'never',
  ) {
    if (!/^[A-Za-z0-9_.-]{1,15}$/.test(iface))
      throw new Error('interface names are 1 to 15 of [A-Za-z0-9_.-]');
  }

  private argv(cmd: string, args: string[]): [string, string[]] {
    return this.netns ? ['ip', ['netns', 'exec', this.netns, cmd, ...args]] : [cmd, args];
  }

  async exec(cmd: string, args: string[]): Promise<string> {
    const [file, argv] = this.argv(cmd, args);
    const { stdout } = await run(file, argv, { timeout: 15_000, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  }

  async exists(): Promise<boolean> {
    try {
      await this.exec('ip', ['link', 'show', 'dev', this.iface]);
      return true;
    } catch {
      return false;
    }
  }

  /** Creates the interface if it does not exist; returns how (`kernel`, `wireguard-go`, or `existing`). */
  async ensureInterface(): Promise<'kernel' | 'wireguard-go' | 'existing'> {
    if (await this.exists()) return 'existing';
    if (this.userspace !== 'always') {
      try {
        await this.exec('ip', ['link', 'add', 'dev', this.iface, 'type', 'wireguard']);
        return 'kernel';
      } catch (err) {
        if (this.userspace === 'never') throw err;
      }
    }
    // wireguard-go forks into the background once the interface exists; it exits when the interface is deleted.
    const [file, argv] = this.argv('wireguard-go', [this.iface]);
    await new Promise<void>((resolve, reject) => {
      const child = spawn(file, argv, {
        env: { ...process.env, WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: '1' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.on('error', reject);
      child.on('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`wireguard-go exited with ${code}: ${err.trim()}`)),
      );
    });
    return 'wireguard-go';
  }

  /** Private key (from its 0600 file) and listen port, the address, and up. */
  async configure(privateKeyFile: string, listenPort: number, address: string): Promise<void> {
    await this.exec('wg', [
      'set',
      this.iface,
      'private-key',
      privateKeyFile,
      'listen-port',
      String(listenPort),
    ]);
    await this.exec('ip', ['address', 'replace', address, 'dev', this.iface]);
    await this.exec('ip', ['link', 'set', 'dev', this.iface, 'up']);
  }

  async peers(): Promise<HostPeer[]> {
    const out = await this.exec('wg', ['show', this.iface, 'dump']);
    const lines = out.split('\n').filter((l) => l.trim() !== '');
    // The first line is the interface itself.
    return lines.slice(1).map((line) => {
      const [publicKey, , , allowed, handshake, rx, tx] = line.split('\t');
      return {
        publicKey: publicKey!,
        allowedIps: !allowed || allowed === '(none)' ? [] : allowed.split(',').sort(),
        latestHandshake: Number(handshake) || 0,
        rxBytes: Number(rx) || 0,
        txBytes: Number(tx) || 0,
      };
    });
  }

  /** Makes the interface hold exactly `wanted` (public key → allowed IPs). Returns what changed. */
  async sync(wanted: Map<string, string[]>): Promise<{ added: number; removed: number }> {
    const current = new Map((await this.peers()).map((p) => [p.publicKey, p.allowedIps]));
    let added = 0;
    let removed = 0;
    for (const key of current.keys()) {
      if (!wanted.has(key)) {
        await this.exec('wg', ['set', this.iface, 'peer', key, 'remove']);
        removed += 1;
      }
    }
    for (const [key, ips] of wanted) {
      const have = current.get(key);
      const want = [...ips].sort();
      if (have && have.join(',') === want.join(',')) continue;
      await this.exec('wg', ['set', this.iface, 'peer', key, 'allowed-ips', want.join(',')]);
      added += 1;
    }
    return { added, removed };
  }

  async remove(): Promise<void> {
    if (await this.exists()) await this.exec('ip', ['link', 'del', 'dev', this.iface]);
  }
}
