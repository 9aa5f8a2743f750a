// Test tier: server
import { expect } from 'chai';
import { CORS_ALLOWED_HEADERS, CORS_EXPOSED_HEADERS } from '../../server/cors.js';
import { createOrg } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, startTestServer, type TestServer } from '../support/server.js';
import { newDeployment, newSite, openSse } from '../modules/hosting/hosting-helpers.js';

const PAGE = 'https://app.example.com';
const list = (value: string | null) => (value ?? '').split(/,\s*/).map((h) => h.toLowerCase());

function preflight(s: TestServer, path: string, method: string, headers: string, origin = PAGE) {
  return http(s.baseUrl, 'OPTIONS', path, {
    headers: {
      origin,
      'access-control-request-method': method,
      'access-control-request-headers': headers,
    },
  });
}

/** What a page may read of a cross-origin answer: its origin allowed, the API's headers exposed, no credentials. */
function expectReadable(res: { headers: Headers }, origin = '*') {
  expect(res.headers.get('access-control-allow-origin')).to.equal(origin);
  expect(list(res.headers.get('access-control-expose-headers'))).to.include.members(
    CORS_EXPOSED_HEADERS.map((h) => h.toLowerCase()),
  );
  expect(res.headers.get('access-control-allow-credentials')).to.equal(null);
}

describe('CORS on /v1 and /trpc (docs/api-conventions.md, "Browsers (CORS)")', function () {
  this.timeout(60_000);

  describe('with the default CORS_ORIGINS (*)', () => {
    let s: TestServer;
    before(async () => {
      s = await sharedServer();
    });

    it('answers preflights 204 with the methods, headers and lifetime the API uses, without credentials', async () => {
      const res = await preflight(s, '/v1/auth/me', 'GET', 'authorization');
      expect(res.status, res.text).to.equal(204);
      expect(res.headers.get('access-control-allow-origin')).to.equal('*');
      expect(list(res.headers.get('access-control-allow-methods'))).to.include.members([
        'get',
        'post',
        'put',
        'delete',
      ]);
      expect(list(res.headers.get('access-control-allow-headers'))).to.include.members(
        CORS_ALLOWED_HEADERS.map((h) => h.toLowerCase()),
      );
      expect(Number(res.headers.get('access-control-max-age'))).to.be.greaterThan(0);
      expect(res.headers.get('access-control-allow-credentials')).to.equal(null);
      expect(res.headers.get('x-request-id')).to.match(/^req_/);
      const trpc = await preflight(
        s,
        '/trpc/vpn.connections.create',
        'POST',
        'content-type, idempotency-key',
      );
      expect(trpc.status).to.equal(204);
      expect(trpc.headers.get('access-control-allow-origin')).to.equal('*');
    });

    it('lets the page read every answer, errors included: 401, 404, 413, 415, and success on /v1 and /trpc', async () => {
      const origin = { origin: PAGE };
      const unauthorized = await http(s.baseUrl, 'GET', '/v1/auth/me', { headers: origin });
      expect(unauthorized.status).to.equal(401);
      expectReadable(unauthorized);
      expect(unauthorized.body.error.request_id).to.equal(unauthorized.headers.get('x-request-id'));
      const unknown = await http(s.baseUrl, 'GET', '/v1/nowhere', { headers: origin });
      expect(unknown.status).to.equal(404);
      expectReadable(unknown);
      const owner = await createOrg(s.deps);
      const tooLarge = await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
        token: owner.token,
        headers: { ...origin, 'content-type': 'application/json' },
        rawBody: JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) }),
      });
      expect(tooLarge.status).to.equal(413);
      expectReadable(tooLarge);
      const textBody = await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
        token: owner.token,
        headers: { ...origin, 'content-type': 'text/plain' },
        rawBody: '{}',
      });
      expect(textBody.status).to.equal(415);
      expectReadable(textBody);
      const me = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token, headers: origin });
      expect(me.status).to.equal(200);
      expectReadable(me);
      const trpc = await http(s.baseUrl, 'GET', '/trpc/auth.me', { token: owner.token, headers: origin });
      expect(trpc.status).to.equal(200);
      expectReadable(trpc);
      expect(list(trpc.headers.get('vary'))).to.include.members(['origin', 'trpc-accept', 'accept']);
    });

    it('streams build logs cross-origin (Server-Sent Events carry the headers)', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const d = await newDeployment(s.baseUrl, owner.token, site.id);
      const sse = await openSse(s.baseUrl, `/v1/hosting/sites/${site.id}/deployments/${d.id}/logs`, {
        token: owner.token,
        headers: { origin: PAGE },
      });
      try {
        expect(sse.status).to.equal(200);
        expect(sse.headers['content-type']).to.equal('text/event-stream; charset=utf-8');
        expect(sse.headers['access-control-allow-origin']).to.equal('*');
        expect(list(String(sse.headers['access-control-expose-headers']))).to.include('x-request-id');
      } finally {
        sse.close();
      }
    });

    it('leaves other paths, requests without Origin and OPTIONS that are not preflights as they were', async () => {
      const health = await http(s.baseUrl, 'GET', '/healthz', { headers: { origin: PAGE } });
      expect(health.headers.get('access-control-allow-origin')).to.equal(null);
      const noOrigin = await http(s.baseUrl, 'GET', '/v1/auth/me');
      expect(noOrigin.headers.get('access-control-allow-origin')).to.equal(null);
      for (const headers of [{}, { origin: PAGE }] as Record<string, string>[]) {
        const options = await http(s.baseUrl, 'OPTIONS', '/v1/auth/me', { headers });
        expect(options.status).to.equal(404);
        expect(options.body.error.code).to.equal('NOT_FOUND');
      }
    });
  });

  describe('with CORS_ORIGINS listing origins and a burst limit of 2', () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer({
        env: { CORS_ORIGINS: `${PAGE}, http://localhost:5173`, RATE_LIMIT_BURST: '2' },
      });
    });
    after(async () => s?.close());

    it('allows the listed origins only: another gets no Access-Control-Allow-Origin', async () => {
      const ok = await preflight(s, '/v1/auth/me', 'GET', 'authorization', 'http://localhost:5173');
      expect(ok.status).to.equal(204);
      expect(ok.headers.get('access-control-allow-origin')).to.equal('http://localhost:5173');
      expect(list(ok.headers.get('vary'))).to.include('origin');
      const other = await preflight(s, '/v1/auth/me', 'GET', 'authorization', 'https://evil.example.net');
      expect(other.headers.get('access-control-allow-origin')).to.equal(null);
      const read = await http(s.baseUrl, 'GET', '/v1/auth/me', {
        headers: { origin: 'https://evil.example.net' },
      });
      expect(read.headers.get('access-control-allow-origin')).to.equal(null);
    });

    it('does not rate-limit nor count preflights; a 429 still carries the headers', async () => {
      const owner = await createOrg(s.deps);
      for (let i = 0; i < 5; i++) {
        const res = await preflight(s, '/v1/vpn/connections', 'POST', 'authorization, content-type');
        expect(res.status).to.equal(204);
      }
      const headers = { origin: PAGE };
      const first = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token, headers });
      expect(first.status).to.equal(200);
      expect(first.headers.get('ratelimit')).to.match(/r=1;/);
      await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token, headers });
      const limited = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token, headers });
      expect(limited.status).to.equal(429);
      expectReadable(limited, PAGE);
      expect(limited.headers.get('retry-after')).to.match(/^\d+$/);
    });
  });
});
