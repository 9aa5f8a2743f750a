// The key pair and the public key of a private key live in shared/, which the VPN agent uses too.
export {
  generateWireguardKeyPair,
  wireguardPublicKey,
  type WireguardKeyPair,
} from '../../../shared/wireguard-keys.js';

/** True for the 44-character standard base64 of exactly 32 bytes. */
export function isWireguardKey(s: string): boolean {
  return /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/.test(s) && Buffer.from(s, 'base64').length === 32;
}

/** Client tunnel addresses come from 10.64.0.0/10, one per peer of a server, numbered from 2 (`.1` is the server). */
export const CLIENT_NETWORK_BASE = (10 << 24) | (64 << 16);
export const CLIENT_NETWORK_SIZE = 1 << 22;

export function clientAddress(peerIndex: number): string {
  if (!Number.isInteger(peerIndex) || peerIndex < 2 || peerIndex >= CLIENT_NETWORK_SIZE - 1) {
    throw new Error('peer index out of the client network');
  }
  const n = CLIENT_NETWORK_BASE + peerIndex;
  return `${(n >>> 24) & 255}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}/32`;
}

export const CLIENT_DNS = ['1.1.1.1', '1.0.0.1'] as const;
export const CLIENT_ALLOWED_IPS = ['0.0.0.0/0', '::/0'] as const;
export const PERSISTENT_KEEPALIVE_SECONDS = 25;

/** A complete `wg-quick` configuration for one client (the file a user saves as `/etc/wireguard/wg0.conf`). */
export function wgQuickConfig(opts: {
  clientPrivateKey: string;
  address: string;
  serverPublicKey: string;
  endpoint: string;
  name?: string;
}): string {
  const lines = [
    ...(opts.name ? [`# ${opts.name.replace(/[\r\n]+/g, ' ')}`] : []),
    '[Interface]',
    `PrivateKey = ${opts.clientPrivateKey}`,
    `Address = ${opts.address}`,
    `DNS = ${CLIENT_DNS.join(', ')}`,
    '',
    '[Peer]',
    `PublicKey = ${opts.serverPublicKey}`,
    `AllowedIPs = ${CLIENT_ALLOWED_IPS.join(', ')}`,
    `Endpoint = ${opts.endpoint}`,
    `PersistentKeepalive = ${PERSISTENT_KEEPALIVE_SECONDS}`,
    '',
  ];
  return lines.join('\n');
}
