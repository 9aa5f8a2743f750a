// Test tier: server
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../../server/config.js';
import {
  blockedAddressReason,
  checkTargetUrl,
  createSafeHttpClient,
  type Resolver,
} from '../../../server/lib/safe-http.js';
import { Webhook } from '../../../server/modules/webhooks/webhook.entity.js';
import { createOrg } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { startReceiver, type Receiver } from './receiver.js';

/** Every address class (docs/webhooks.md, "Webhooks") that must be refused, as URLs a customer could type. */
const REFUSED_URLS: Record<string, string[]> = {
  'plain http': ['http://hooks.example.com/in'],
  credentials: ['https://user:pass@hooks.example.com/in', 'https://token@hooks.example.com/'],
  'IPv4 loopback': [
    'https://127.0.0.1/',
    'https://127.8.9.10:8443/x',
    'https://localhost/',
    'https://a.b.localhost/',
  ],
  'decimal, hex and octal IPv4': [
    'https://2130706433/',
    'https://0x7f000001/',
    'https://0x7f.0.0.1/',
    'https://0177.0.0.1/',
    'https://127.1/',
    'https://017700000001/',
    'https://167772161/', // 10.0.0.1
    'https://0xa9.0xfe.0xa9.0xfe/', // 169.254.169.254
  ],
  'RFC 1918 private': [
    'https://10.0.0.1/',
    'https://172.16.5.4/',
    'https://172.31.255.255/',
    'https://192.168.1.1/',
  ],
  'link-local': ['https://169.254.1.1/'],
  'cloud metadata': [
    'https://169.254.169.254/latest/meta-data/',
    'https://[fd00:ec2::254]/',
    'https://metadata.google.internal/computeMetadata/v1/',
    'https://100.100.100.200/',
    'https://168.63.129.16/',
  ],
  CGNAT: ['https://100.64.0.1/', 'https://100.127.255.254/'],
  multicast: ['https://224.0.0.1/', 'https://239.255.255.250/', 'https://[ff02::1]/'],
  'broadcast and unspecified': [
    'https://255.255.255.255/',
    'https://0.0.0.0/',
    'https://0/',
    'https://[::]/',
  ],
  reserved: [
    'https://192.0.2.10/',
    'https://198.51.100.1/',
    'https://203.0.113.5/',
    'https://198.18.0.1/',
    'https://240.0.0.1/',
    'https://192.0.0.8/',
    'https://[2001:db8::1]/',
  ],
  'IPv6 loopback, link-local, unique-local': [
    'https://[::1]/',
    'https://[fe80::1]/',
    'https://[fc00::1]/',
    'https://[fd12:3456::1]/',
  ],
  'IPv4-mapped IPv6': [
    'https://[::ffff:127.0.0.1]/',
    'https://[::ffff:7f00:1]/',
    'https://[::ffff:10.0.0.1]/',
    'https://[::ffff:169.254.169.254]/',
  ],
  'IPv6 that embeds IPv4 (NAT64, 6to4, Teredo)': [
    'https://[64:ff9b::a00:1]/',
    'https://[64:ff9b::10.0.0.1]/',
    'https://[64:ff9b::169.254.169.254]/',
    'https://[64:ff9b::127.0.0.1]/',
    'https://[64:ff9b:1::808:808]/', // the local-use NAT64 prefix, whatever it embeds
    'https://[2002:7f00:1::1]/',
    'https://[2002:a00:1::1]/', // 6to4 of 10.0.0.1
    'https://[2002:a9fe:a9fe::1]/', // 6to4 of 169.254.169.254
    'https://[2002:808:808::1]/', // 6to4 is refused whatever it embeds
    'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
    'https://[2001::1]/',
  ],
  'IPv4-compatible IPv6 (::/96)': [
    'https://[::127.0.0.1]/',
    'https://[::7f00:1]/',
    'https://[::a9fe:a9fe]/', // 169.254.169.254
    'https://[::169.254.169.254]/',
    'https://[::10.0.0.1]/',
    'https://[::8.8.8.8]/',
  ],
  'IPv6 site-local, unique-local, documentation and other non-global ranges': [
    'https://[fec0::1]/',
    'https://[feff::1]/',
    'https://[fc00::1]/',
    'https://[fdff:ffff::1]/',
    'https://[2001:db8::1]/',
    'https://[2001:db8:ffff::1]/',
    'https://[3fff::1]/', // documentation (RFC 9637)
    'https://[2001:2::1]/', // benchmarking
    'https://[2001:10::1]/', // ORCHID
    'https://[100::1]/', // discard
    'https://[4000::1]/', // outside 2000::/3
    'https://[5f00::1]/',
  ],
  'not a URL': ['hooks.example.com/in', 'ftp://hooks.example.com/', 'javascript:alert(1)'],
};

const ACCEPTED_URLS = [
  'https://hooks.example.com/in',
  'https://93.184.216.34/hook',
  'https://[2606:4700:4700::1111]/hook',
  // A DNS64 network's address of a public IPv4 host is judged as that host.
  'https://[64:ff9b::93.184.216.34]/hook',
  'https://hooks.example.com:8443/a?b=c',
];

const fakeResolver =
  (answers: Record<string, string[] | (() => string[])>): Resolver =>
  async (host) => {
    const a = answers[host];
    if (!a) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return typeof a === 'function' ? a() : a;
  };

describe('webhook SSRF rules', () => {
  describe('address classification', () => {
    const strict = { allowPrivate: false };
    const local = { allowPrivate: true };

    it('allows only global unicast addresses', () => {
      for (const a of [
        '8.8.8.8',
        '93.184.216.34',
        '2606:4700:4700::1111',
        '::ffff:8.8.8.8',
        '64:ff9b::808:808',
        '[2001:4860:4860::8888]',
      ]) {
        expect(blockedAddressReason(a, strict), a).to.equal(undefined);
      }
      for (const a of [
        '127.0.0.1',
        '10.1.2.3',
        '172.20.0.1',
        '192.168.0.1',
        '169.254.169.254',
        '100.64.1.1',
        '224.1.1.1',
        '255.255.255.255',
        '0.0.0.0',
        '192.0.2.1',
        '::1',
        '::',
        'fe80::1',
        'fc00::1',
        'ff02::1',
        '::ffff:127.0.0.1',
        '64:ff9b::7f00:1',
        '2002:7f00:1::',
        '2001:db8::1',
        // IPv4-compatible (::/96): ipaddr.js alone reads the dotted form as IPv4-mapped.
        '::127.0.0.1',
        '::7f00:1',
        '::a9fe:a9fe',
        '::1.2.3.4',
        '[::8.8.8.8]',
        '64:ff9b::a9fe:a9fe',
        '64:ff9b:1::808:808',
        '2002:a00:1::1',
        '2002:808:808::1',
        '2001:0:4136:e378:8000:63bf:3fff:fdd2',
        'fec0::1',
        'fc00::1',
        'fd00::1',
        '3fff::1',
        '2001:2::1',
        '4000::1',
      ]) {
        expect(blockedAddressReason(a, strict), a).to.be.a('string');
      }
    });

    it('with private targets allowed (local testing), still refuses metadata, link-local and multicast', () => {
      for (const a of ['127.0.0.1', '10.1.2.3', '192.168.0.1', '::1', 'fd12::1', '100.64.0.1']) {
        expect(blockedAddressReason(a, local), a).to.equal(undefined);
      }
      for (const a of [
        '169.254.169.254',
        'fd00:ec2::254',
        '100.100.100.200',
        '169.254.1.1',
        '224.0.0.1',
        '0.0.0.0',
      ]) {
        expect(blockedAddressReason(a, local), a).to.be.a('string');
      }
    });

    it('refuses a name that resolves to a refused address, even among public ones', async () => {
      const resolver = fakeResolver({
        'internal.example.com': ['10.0.0.7'],
        'mixed.example.com': ['93.184.216.34', '127.0.0.1'],
        'v6.example.com': ['::ffff:169.254.169.254'],
        'compat.example.com': ['2606:4700:4700::1111', '::a9fe:a9fe'],
        'nat64.example.com': ['64:ff9b::a00:7'],
        'sixtofour.example.com': ['2002:a00:7::1'],
        'public.example.com': ['93.184.216.34', '2606:4700:4700::1111'],
      });
      for (const host of ['internal', 'mixed', 'v6', 'compat', 'nat64', 'sixtofour']) {
        const r = await checkTargetUrl(`https://${host}.example.com/`, { allowPrivate: false }, resolver);
        expect(r.ok, host).to.equal(false);
      }
      expect(
        (await checkTargetUrl('https://public.example.com/', { allowPrivate: false }, resolver)).ok,
      ).to.equal(true);
      // Not resolvable now: accepted; delivery checks again on every connection.
      expect(
        (await checkTargetUrl('https://nxdomain.example.com/', { allowPrivate: false }, resolver)).ok,
      ).to.equal(true);
    });
  });

  describe('at delivery time', () => {
    let rx: Receiver;
    beforeEach(async () => {
      rx = await startReceiver();
    });
    afterEach(async () => {
      await rx.close();
    });

    it('refuses a name that now resolves to a private address (DNS rebinding) without connecting', async () => {
      let calls = 0;
      // Public when the URL is checked at create time, loopback when the delivery connects.
      const resolver = fakeResolver({
        'rebind.example.com': () => (++calls === 1 ? ['93.184.216.34'] : ['127.0.0.1']),
      });
      const port = new URL(rx.url).port;
      const url = `https://rebind.example.com:${port}/hook`;
      expect((await checkTargetUrl(url, { allowPrivate: false }, resolver)).ok).to.equal(true);
      const client = createSafeHttpClient({ allowPrivate: false, timeoutMs: 2000, resolver });
      try {
        const r = await client.post(url, Buffer.from('{}'), { 'content-type': 'application/json' });
        expect(r).to.include({ kind: 'error', blocked: true });
        expect(r.kind === 'error' && r.error).to.match(
          /^Refused: rebind\.example\.com resolves to a loopback/,
        );
        expect(rx.requests).to.have.length(0);
      } finally {
        client.close();
      }
    });

    it('connects to the address it checked, and refuses metadata even when private targets are allowed', async () => {
      const port = new URL(rx.url).port;
      const resolver = fakeResolver({
        'receiver.test': ['127.0.0.1'],
        'metadata.test': ['169.254.169.254'],
      });
      const client = createSafeHttpClient({ allowPrivate: true, timeoutMs: 2000, resolver });
      try {
        const ok = await client.post(`http://receiver.test:${port}/hook`, Buffer.from('{"a":1}'), {
          'content-type': 'application/json',
        });
        expect(ok).to.include({ kind: 'response', status: 200 });
        expect(rx.requests).to.have.length(1);
        expect(rx.requests[0]!.headers.host).to.equal(`receiver.test:${port}`);
        const meta = await client.post(`http://metadata.test:${port}/latest`, Buffer.from('{}'), {});
        expect(meta).to.include({ kind: 'error', blocked: true });
        expect(rx.requests).to.have.length(1);
      } finally {
        client.close();
      }
    });
  });

  describe('WEBHOOK_ALLOW_PRIVATE_TARGETS', () => {
    it('is refused when NODE_ENV=production', () => {
      expect(() =>
        loadConfig({
          NODE_ENV: 'production',
          JWT_SECRET: 'x'.repeat(40),
          WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        }),
      ).to.throw(ConfigError, /WEBHOOK_ALLOW_PRIVATE_TARGETS/);
    });
  });

  describe('over HTTP, with private targets not allowed', () => {
    let s: TestServer;
    let rx: Receiver;
    before(async () => {
      s = await startTestServer({ env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' } });
      rx = await startReceiver();
    });
    after(async () => {
      await rx.close();
      await s.close();
    });

    for (const [kind, urls] of Object.entries(REFUSED_URLS)) {
      it(`refuses ${kind} URLs with 400 at create and update`, async () => {
        const owner = await createOrg(s.deps);
        const ok = await http(s.baseUrl, 'POST', '/v1/webhooks', {
          token: owner.token,
          body: { url: 'https://hooks.example.com/ok', events: ['user.login'] },
        });
        expect(ok.status).to.equal(201);
        for (const url of urls) {
          const created = await http(s.baseUrl, 'POST', '/v1/webhooks', {
            token: owner.token,
            body: { url, events: ['user.login'] },
          });
          expect(created.status, `create ${url}`).to.equal(400);
          expect(created.body.error.code).to.equal('VALIDATION_ERROR');
          expect(created.body.error.details[0].path).to.equal('url');
          const updated = await http(s.baseUrl, 'PUT', `/v1/webhooks/${ok.body.webhook.id}`, {
            token: owner.token,
            body: { url },
          });
          expect(updated.status, `update ${url}`).to.equal(400);
        }
        const list = await http(s.baseUrl, 'GET', '/v1/webhooks', { token: owner.token });
        expect(list.body.total).to.equal(1);
        expect(list.body.webhooks[0].url).to.equal('https://hooks.example.com/ok');
      });
    }

    it('accepts public https URLs', async () => {
      const owner = await createOrg(s.deps);
      for (const url of ACCEPTED_URLS) {
        const res = await http(s.baseUrl, 'POST', '/v1/webhooks', {
          token: owner.token,
          body: { url, events: ['user.login'] },
        });
        expect(res.status, url).to.equal(201);
      }
    });

    it('refuses again at delivery time a stored URL that points to a private address', async () => {
      const owner = await createOrg(s.deps);
      const created = await http(s.baseUrl, 'POST', '/v1/webhooks', {
        token: owner.token,
        body: { url: 'https://hooks.example.com/in', events: ['user.login'] },
      });
      const id = created.body.webhook.id;
      // As if the rules had been looser when it was stored.
      const port = new URL(rx.url).port;
      await s.deps.db.orm.em.fork().nativeUpdate(Webhook, { id }, { url: `https://127.0.0.1:${port}/hook` });
      const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${id}/test`, { token: owner.token, body: {} });
      expect(res.status).to.equal(200);
      expect(res.body.delivery).to.include({ status: 'failed', response_status: null });
      expect(res.body.delivery.error).to.match(/^Refused: /);
      expect(rx.requests).to.have.length(0);
    });
  });
});
