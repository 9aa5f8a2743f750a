// Test tier: unit
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  clientAddress,
  generateWireguardKeyPair,
  isWireguardKey,
  wgQuickConfig,
  wireguardPublicKey,
} from '../../../server/modules/vpn/wireguard.js';
import { assertValidWgQuick } from './vpn-helpers.js';

function hasBinary(name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

describe('WireGuard keys and wg-quick configuration', () => {
  it('makes Curve25519 key pairs encoded as wg genkey / wg pubkey print them', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const k = generateWireguardKeyPair();
      expect(isWireguardKey(k.privateKey)).to.equal(true);
      expect(isWireguardKey(k.publicKey)).to.equal(true);
      const d = Buffer.from(k.privateKey, 'base64');
      // Clamped like `wg genkey`.
      expect(d[0]! & 7).to.equal(0);
      expect(d[31]! & 0xc0).to.equal(0x40);
      expect(wireguardPublicKey(k.privateKey)).to.equal(k.publicKey);
      seen.add(k.privateKey);
    }
    expect(seen.size).to.equal(20);
  });

  it('matches the RFC 7748 X25519 test vector', () => {
    const alicePrivate = Buffer.from(
      '77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a',
      'hex',
    ).toString('base64');
    const alicePublic = Buffer.from(
      '8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a',
      'hex',
    ).toString('base64');
    expect(wireguardPublicKey(alicePrivate)).to.equal(alicePublic);
  });

  it('numbers client addresses inside 10.64.0.0/10', () => {
    expect(clientAddress(2)).to.equal('10.64.0.2/32');
    expect(clientAddress(258)).to.equal('10.64.1.2/32');
    expect(clientAddress((1 << 22) - 2)).to.equal('10.127.255.254/32');
    expect(() => clientAddress(1)).to.throw();
  });

  it('writes a configuration that parses as a wg-quick file', () => {
    const client = generateWireguardKeyPair();
    const server = generateWireguardKeyPair();
    const text = wgQuickConfig({
      name: 'Laptop\n[Peer]',
      clientPrivateKey: client.privateKey,
      address: '10.64.0.9/32',
      serverPublicKey: server.publicKey,
      endpoint: 'fra-1.vpn.example.net:51820',
    });
    const { iface, peer } = assertValidWgQuick(text);
    expect(iface.entries.get('PrivateKey')).to.equal(client.privateKey);
    expect(peer.entries.get('PublicKey')).to.equal(server.publicKey);
    expect(peer.entries.get('Endpoint')).to.equal('fra-1.vpn.example.net:51820');
  });

  describe('with the WireGuard tools (Debian wireguard-tools)', function () {
    before(function () {
      // wg-quick re-runs itself through sudo unless it is root; skip where it cannot run.
      if (!hasBinary('wg-quick') || !hasBinary('wg') || process.getuid?.() !== 0) this.skip();
    });

    it('wg-quick strip accepts the configuration and wg pubkey derives the same public key', () => {
      const client = generateWireguardKeyPair();
      const server = generateWireguardKeyPair();
      const text = wgQuickConfig({
        name: 'Laptop',
        clientPrivateKey: client.privateKey,
        address: '10.64.0.9/32',
        serverPublicKey: server.publicKey,
        endpoint: 'fra-1.vpn.example.net:51820',
      });
      const dir = mkdtempSync(join(tmpdir(), 'wgq-'));
      try {
        const file = join(dir, 'wg0.conf');
        writeFileSync(file, text, { mode: 0o600 });
        const stripped = execFileSync('wg-quick', ['strip', file], { encoding: 'utf8' });
        // What remains is exactly what `wg setconf` reads: no wg-quick-only keys.
        expect(stripped).to.include(`PrivateKey = ${client.privateKey}`);
        expect(stripped).to.include(`PublicKey = ${server.publicKey}`);
        expect(stripped).not.to.match(/^(Address|DNS)\s*=/m);
        const pub = execFileSync('wg', ['pubkey'], { input: `${client.privateKey}\n`, encoding: 'utf8' });
        expect(pub.trim()).to.equal(client.publicKey);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
