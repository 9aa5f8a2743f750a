import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';

/** A WireGuard key pair as `wg genkey` / `wg pubkey` print them: standard base64 of 32 raw bytes (44 chars). */
export interface WireguardKeyPair {
  privateKey: string;
  publicKey: string;
}

/** Clamps a Curve25519 scalar the way `wg genkey` does; X25519 clamps anyway, so the public key is unchanged. */
function clamp(raw: Buffer): Buffer {
  const out = Buffer.from(raw);
  out[0]! &= 248;
  out[31] = (out[31]! & 127) | 64;
  return out;
}

export function generateWireguardKeyPair(): WireguardKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const d = privateKey.export({ format: 'jwk' }).d!;
  const x = publicKey.export({ format: 'jwk' }).x!;
  return {
    privateKey: clamp(Buffer.from(d, 'base64url')).toString('base64'),
    publicKey: Buffer.from(x, 'base64url').toString('base64'),
  };
}

/** The public key of a base64 private key (what `wg pubkey` prints). */
export function wireguardPublicKey(privateKey: string): string {
  const d = Buffer.from(privateKey, 'base64');
  if (d.length !== 32) throw new Error('a WireGuard private key is 32 bytes');
  const key = createPrivateKey({
    key: { kty: 'OKP', crv: 'X25519', d: d.toString('base64url'), x: '' },
    format: 'jwk',
  });
  return Buffer.from(createPublicKey(key).export({ format: 'jwk' }).x!, 'base64url').toString('base64');
}

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
