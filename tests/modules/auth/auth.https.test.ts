// Test tier: server
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { FastifyRequest } from 'fastify';
import { isSecureTransport } from '../../../server/trpc/context.js';
import { testConfig } from '../../support/env.js';
import { createOrg, type TestUser } from '../../support/factories.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { expectError } from '../../transport/envelope.js';
import { rawRequest, type RawResult } from '../../transport/raw.js';

/** The first non-loopback IPv4 address of this machine: connecting to it makes the client non-loopback. */
function externalIPv4(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}

type Running = TestServer & { owner: TestUser };

/** A server listening on every interface, with the given environment on top of the test defaults. */
async function start(env: Record<string, string | undefined>): Promise<Running> {
  const server = await startTestServer({
    config: testConfig({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false', ...env }),
    startJobs: false,
    host: '0.0.0.0',
  });
  return Object.assign(server, { owner: await createOrg(server.deps) });
}

// Production needs an SMTP server; these tests send no mail, so none listens there.
const PRODUCTION = {
  NODE_ENV: 'production',
  BCRYPT_COST: '10',
  MAIL_URL: 'smtp://127.0.0.1:2525',
  MAIL_FROM: 'no-reply@example.com',
};

describe('HTTPS rule for /auth/* (docs/getting-started.md, "Calling the API")', function () {
  this.timeout(60_000);
  const ip = externalIPv4();

  const loginBody = (u: TestUser) => JSON.stringify({ email: u.email, password: u.password });
  const json = { 'content-type': 'application/json' };

  describe('the decision (isSecureTransport)', () => {
    const req = (o: { ip: string; encrypted?: boolean; proto?: string; forwarded?: string }) =>
      ({
        protocol: o.proto ?? (o.encrypted ? 'https' : 'http'),
        raw: { socket: { encrypted: o.encrypted } },
        socket: { remoteAddress: o.ip },
        headers: o.forwarded ? { 'x-forwarded-proto': o.forwarded } : {},
      }) as unknown as FastifyRequest;
    const prod = testConfig({ ...PRODUCTION, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
    const prodProxy = { ...prod, trustProxy: true };
    const dev = testConfig();

    it('allows TLS connections, trusted X-Forwarded-Proto: https, and loopback outside production', () => {
      expect(isSecureTransport(req({ ip: '198.51.100.1', encrypted: true }), prod)).to.equal(true);
      expect(isSecureTransport(req({ ip: '10.0.0.1', forwarded: 'https' }), prodProxy)).to.equal(true);
      expect(isSecureTransport(req({ ip: '10.0.0.1', forwarded: 'HTTPS, http' }), prodProxy)).to.equal(true);
      for (const lo of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1']) {
        expect(isSecureTransport(req({ ip: lo }), dev), lo).to.equal(true);
      }
    });

    it('refuses plain HTTP otherwise', () => {
      expect(isSecureTransport(req({ ip: '127.0.0.1' }), prod)).to.equal(false);
      expect(isSecureTransport(req({ ip: '198.51.100.1' }), dev)).to.equal(false);
      expect(isSecureTransport(req({ ip: '10.0.0.1', forwarded: 'https' }), prod)).to.equal(false);
      expect(isSecureTransport(req({ ip: '10.0.0.1', forwarded: 'http' }), prodProxy)).to.equal(false);
      expect(isSecureTransport(req({ ip: '10.0.0.1', forwarded: 'http, https' }), prodProxy)).to.equal(false);
      expect(isSecureTransport(req({ ip: '::ffff:10.0.0.1' }), dev)).to.equal(false);
    });
  });

  describe('over the network', function () {
    before(function () {
      // Without a non-loopback address the decision is covered by the unit tests above only.
      if (!ip) this.skip();
    });

    describe('production, plain HTTP', () => {
      let p: Running;
      before(async () => {
        p = await start(PRODUCTION);
      });
      after(async () => p?.close());

      it('answers 403 HTTPS_REQUIRED on every /v1/auth/* and /trpc auth.* call, from outside and from loopback', async () => {
        for (const host of [ip!, '127.0.0.1']) {
          const base = `http://${host}:${p.port}`;
          const results: [string, RawResult][] = [
            [
              'login',
              await rawRequest(`${base}/v1/auth/login`, {
                method: 'POST',
                headers: json,
                body: loginBody(p.owner),
              }),
            ],
            [
              'register',
              await rawRequest(`${base}/v1/auth/register`, { method: 'POST', headers: json, body: '{}' }),
            ],
            [
              'refresh',
              await rawRequest(`${base}/v1/auth/refresh`, {
                method: 'POST',
                headers: json,
                body: JSON.stringify({ refresh_token: p.owner.refreshToken }),
              }),
            ],
            [
              'me',
              await rawRequest(`${base}/v1/auth/me`, {
                headers: { authorization: `Bearer ${p.owner.token}` },
              }),
            ],
            [
              'logout',
              await rawRequest(`${base}/v1/auth/logout`, {
                method: 'POST',
                headers: { ...json, authorization: `Bearer ${p.owner.token}` },
                body: '{}',
              }),
            ],
          ];
          for (const [label, res] of results) {
            expect(res.status, `${host} ${label}`).to.equal(403);
            expectError(res, 'HTTPS_REQUIRED');
          }
          const trpc = await rawRequest(`${base}/trpc/auth.login`, {
            method: 'POST',
            headers: json,
            body: loginBody(p.owner),
          });
          expect(trpc.status).to.equal(403);
          expect(trpc.body.error.data.code).to.equal('HTTPS_REQUIRED');
          // Nothing else is affected by the rule.
          expect((await rawRequest(`${base}/healthz`)).status).to.equal(200);
        }
        // The refused logout and refresh changed nothing.
        const revoked = await p.deps.db.orm.em
          .fork()
          .execute('select id from login_sessions where user_id = ? and revoked_at is not null', [
            p.owner.id,
          ]);
        expect(revoked).to.have.length(0);
      });

      it('does not trust X-Forwarded-Proto without TRUST_PROXY', async () => {
        const res = await rawRequest(`http://${ip}:${p.port}/v1/auth/login`, {
          method: 'POST',
          headers: { ...json, 'x-forwarded-proto': 'https' },
          body: loginBody(p.owner),
        });
        expectError(res, 'HTTPS_REQUIRED');
      });
    });

    describe('production behind a proxy (TRUST_PROXY=true)', () => {
      let p: Running;
      before(async () => {
        p = await start({ ...PRODUCTION, TRUST_PROXY: 'true' });
      });
      after(async () => p?.close());

      it('accepts X-Forwarded-Proto: https and refuses X-Forwarded-Proto: http or none', async () => {
        const url = `http://${ip}:${p.port}/v1/auth/login`;
        const ok = await rawRequest(url, {
          method: 'POST',
          headers: { ...json, 'x-forwarded-proto': 'https' },
          body: loginBody(p.owner),
        });
        expect(ok.status, ok.text).to.equal(200);
        expect(ok.body.token).to.be.a('string');
        for (const headers of [{ ...json, 'x-forwarded-proto': 'http' }, json]) {
          expectError(
            await rawRequest(url, { method: 'POST', headers, body: loginBody(p.owner) }),
            'HTTPS_REQUIRED',
          );
        }
      });
    });

    describe('production serving TLS itself (TLS_CERT_FILE, TLS_KEY_FILE)', () => {
      let p: Running;
      let dir: string;
      let cert: Buffer;
      before(async () => {
        dir = mkdtempSync(join(tmpdir(), 'tls-'));
        execFileSync(
          'openssl',
          [
            'req',
            '-x509',
            '-newkey',
            'ec',
            '-pkeyopt',
            'ec_paramgen_curve:prime256v1',
            '-nodes',
            '-keyout',
            join(dir, 'key.pem'),
            '-out',
            join(dir, 'cert.pem'),
            '-days',
            '1',
            '-subj',
            '/CN=localhost',
            '-addext',
            `subjectAltName=DNS:localhost,IP:127.0.0.1,IP:${ip}`,
          ],
          { stdio: 'ignore' },
        );
        cert = readFileSync(join(dir, 'cert.pem'));
        p = await start({
          ...PRODUCTION,
          TLS_CERT_FILE: join(dir, 'cert.pem'),
          TLS_KEY_FILE: join(dir, 'key.pem'),
        });
      });
      after(async () => {
        await p?.close();
        rmSync(dir, { recursive: true, force: true });
      });

      it('speaks TLS and lets /v1/auth/* through from a non-loopback client', async () => {
        expect(p.deps.config.publicBaseUrl).to.match(/^https:\/\//);
        const base = `https://${ip}:${p.port}`;
        const res = await rawRequest(`${base}/v1/auth/login`, {
          method: 'POST',
          headers: json,
          body: loginBody(p.owner),
          ca: cert,
        });
        expect(res.status, res.text).to.equal(200);
        const me = await rawRequest(`${base}/v1/auth/me`, {
          headers: { authorization: `Bearer ${res.body.token}` },
          ca: cert,
        });
        expect(me.status).to.equal(200);
        expect(me.body.user.id).to.equal(p.owner.id);
        // Plain HTTP to the TLS port is not served.
        const plain = await rawRequest(`http://${ip}:${p.port}/v1/auth/me`).catch(() => undefined);
        expect(plain?.status ?? 0).not.to.equal(200);
      });
    });

    describe('outside production', () => {
      let p: Running;
      before(async () => {
        p = await start({});
      });
      after(async () => p?.close());

      it('exempts only loopback clients', async () => {
        const outside = await rawRequest(`http://${ip}:${p.port}/v1/auth/login`, {
          method: 'POST',
          headers: json,
          body: loginBody(p.owner),
        });
        expectError(outside, 'HTTPS_REQUIRED');
        const loopback = await rawRequest(`http://127.0.0.1:${p.port}/v1/auth/login`, {
          method: 'POST',
          headers: json,
          body: loginBody(p.owner),
        });
        expect(loopback.status).to.equal(200);
      });
    });
  });
});
