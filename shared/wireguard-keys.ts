// WireGuard keys, shared by the API (server/modules/vpn/wireguard.ts) and the VPN agent (vpn-agent/agent.ts), which
// runs on hosts of its own and imports nothing of server/ (docs/architecture.md, "Project layout").
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
