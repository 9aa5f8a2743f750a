// Test tier: server
import { expect } from 'chai';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { createOrg } from '../support/factories.js';
import { expectError, LEAK_PATTERN } from './envelope.js';
import { rawRequest } from './raw.js';

describe('transport (docs/getting-started.md, "Calling the API" and "Errors")', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  const login = (headers: Record<string, string>, body?: string | Buffer) =>
    rawRequest(`${s.baseUrl}/v1/auth/login`, { method: 'POST', headers, body });

  describe('request bodies', () => {
    it('accepts application/json with a charset parameter, in any letter case', async () => {
      const owner = await createOrg(s.deps);
      const body = JSON.stringify({ email: owner.email, password: owner.password });
      for (const ct of [
        'application/json',
        'application/json; charset=utf-8',
        'Application/JSON;charset=UTF-8',
      ]) {
        const res = await login({ 'content-type': ct }, body);
        expect(res.status, `${ct}: ${res.text}`).to.equal(200);
      }
    });

    for (const [label, headers] of [
      ['text/plain', { 'content-type': 'text/plain' }],
      ['application/xml', { 'content-type': 'application/xml' }],
      ['form-urlencoded', { 'content-type': 'application/x-www-form-urlencoded' }],
      ['no Content-Type at all', {}],
    ] as const) {
      it(`refuses a body sent as ${label} with 415 UNSUPPORTED_MEDIA_TYPE`, async () => {
        const res = await login(headers, '{"email":"a@b.test","password":"12345678"}');
        expectError(res, 'UNSUPPORTED_MEDIA_TYPE');
      });
    }

    it('refuses a body over 1 MiB with 413 PAYLOAD_TOO_LARGE (REST and /trpc)', async () => {
      const big = JSON.stringify({ email: 'a@b.test', password: 'x'.repeat(1024 * 1024) });
      expectError(await login({ 'content-type': 'application/json' }, big), 'PAYLOAD_TOO_LARGE');
      const trpc = await rawRequest(`${s.baseUrl}/trpc/auth.login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: big,
      });
      expect(trpc.status).to.equal(413);
      expect(trpc.text).not.to.match(LEAK_PATTERN);
    });

    it('accepts a body of exactly 1 MiB', async () => {
      const prefix = '{"email":"a@b.test","password":"';
      const body = prefix + 'x'.repeat(1024 * 1024 - prefix.length - 2) + '"}';
      expect(Buffer.byteLength(body)).to.equal(1024 * 1024);
      // Parsed and validated: the password is too long, which is a 400, not a 413.
      const err = expectError(await login({ 'content-type': 'application/json' }, body), 'VALIDATION_ERROR');
      expect(err.details).to.deep.include({
        path: 'password',
        message: 'Password must be at most 72 bytes (UTF-8)',
      });
    });

    for (const bad of ['{"email": ', '{email: "a"}', 'null,', '[1,2', '\u0000']) {
      it(`answers malformed JSON ${JSON.stringify(bad)} with 400 INVALID_JSON`, async () => {
        expectError(await login({ 'content-type': 'application/json' }, bad), 'INVALID_JSON');
      });
    }

    it('refuses JSON that is not an object with 400 VALIDATION_ERROR', async () => {
      for (const body of ['[]', '"text"', '42', 'null']) {
        const res = await login({ 'content-type': 'application/json' }, body);
        expect(res.status, body).to.equal(400);
        expect(res.body.error.code, body).to.be.oneOf(['VALIDATION_ERROR', 'INVALID_JSON']);
      }
    });

    it('refuses an unknown body field with 400 VALIDATION_ERROR naming its path', async () => {
      const owner = await createOrg(s.deps);
      const res = await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: owner.email, password: owner.password, role: 'owner' },
      });
      const err = expectError(res, 'VALIDATION_ERROR');
      expect(err.details).to.deep.equal([{ path: 'role', message: 'Unknown field' }]);
    });

    it('names every invalid field in details', async () => {
      const res = await http(s.baseUrl, 'POST', '/v1/auth/register', {
        body: { email: 'not-an-email', password: 'short', name: '', organization_name: 'Acme' },
      });
      const err = expectError(res, 'VALIDATION_ERROR');
      expect(err.details!.map((d: { path: string }) => d.path)).to.have.members([
        'email',
        'password',
        'name',
      ]);
      for (const d of err.details!) expect(Object.keys(d)).to.have.members(['path', 'message']);
    });

    it('treats an empty body without Content-Type as {} (POST /auth/logout)', async () => {
      const owner = await createOrg(s.deps);
      const res = await rawRequest(`${s.baseUrl}/v1/auth/logout`, {
        method: 'POST',
        headers: { authorization: `Bearer ${owner.token}` },
      });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.success).to.equal(true);
    });
  });

  describe('query parameters and /trpc bodies', () => {
    it('ignores unknown query parameters', async () => {
      const owner = await createOrg(s.deps);
      const res = await http(s.baseUrl, 'GET', '/v1/auth/me?expand=everything&debug=1', {
        token: owner.token,
      });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.user.id).to.equal(owner.id);
    });

    it('answers malformed JSON on /trpc with INVALID_JSON and a generic message', async () => {
      const res = await rawRequest(`${s.baseUrl}/trpc/auth.login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"email": ',
      });
      expect(res.status).to.equal(400);
      expect(res.body.error.data.code).to.equal('INVALID_JSON');
      expect(res.body.error.message).to.equal('Request body is not valid JSON');
    });
  });

  describe('caching', () => {
    it('marks API responses no-store (token responses above all) and nosniff', async () => {
      const owner = await createOrg(s.deps);
      const login = await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: owner.email, password: owner.password },
      });
      const trpc = await http(s.baseUrl, 'GET', '/trpc/auth.me', { token: owner.token });
      const err = await http(s.baseUrl, 'GET', '/v1/auth/me');
      for (const res of [login, trpc, err]) {
        expect(res.headers.get('cache-control')).to.equal('no-store');
        expect(res.headers.get('x-content-type-options')).to.equal('nosniff');
      }
    });
  });

  describe('request ids', () => {
    it('reuses a valid incoming X-Request-Id on success and error responses', async () => {
      const id = 'client-req.42_A-b';
      const ok = await http(s.baseUrl, 'GET', '/healthz', { headers: { 'x-request-id': id } });
      expect(ok.headers.get('x-request-id')).to.equal(id);
      const err = await http(s.baseUrl, 'GET', '/v1/auth/me', { headers: { 'x-request-id': id } });
      expect(expectError(err, 'UNAUTHORIZED').request_id).to.equal(id);
      const max = 'a'.repeat(128);
      const long = await http(s.baseUrl, 'GET', '/healthz', { headers: { 'x-request-id': max } });
      expect(long.headers.get('x-request-id')).to.equal(max);
    });

    for (const bad of ['a'.repeat(129), 'has space', 'semi;colon', 'quote"', 'ünïcode', 'a/b']) {
      it(`replaces an invalid incoming X-Request-Id ${JSON.stringify(bad.slice(0, 20))} with a req_ id`, async () => {
        const res = await rawRequest(`${s.baseUrl}/v1/auth/me`, {
          headers: { 'x-request-id': Buffer.from(bad, 'utf8').toString('latin1') },
        });
        const err = expectError(res, 'UNAUTHORIZED');
        expect(err.request_id).to.match(/^req_[a-z0-9]{20}$/);
      });
    }

    it('gives every response a fresh req_ id when none is sent', async () => {
      const a = await http(s.baseUrl, 'GET', '/healthz');
      const b = await http(s.baseUrl, 'GET', '/healthz');
      expect(a.headers.get('x-request-id')).to.match(/^req_[a-z0-9]{20}$/);
      expect(a.headers.get('x-request-id')).not.to.equal(b.headers.get('x-request-id'));
    });

    it('carries the request id on /trpc responses and errors too', async () => {
      const res = await http(s.baseUrl, 'GET', '/trpc/auth.me', { headers: { 'x-request-id': 'trpc-1' } });
      expect(res.status).to.equal(401);
      expect(res.headers.get('x-request-id')).to.equal('trpc-1');
      expect(res.body.error.data.request_id).to.equal('trpc-1');
      expect(res.body.error.data.code).to.equal('UNAUTHORIZED');
    });
  });

  describe('unknown routes', () => {
    for (const [method, path] of [
      ['GET', '/v1/nothing-here'],
      ['GET', '/nothing-here'],
      ['POST', '/v1/vpn/nowhere'],
      ['GET', '/v1/auth/login'],
      ['DELETE', '/v1/auth/me'],
      ['GET', '/v2/auth/me'],
    ] as const) {
      it(`answers ${method} ${path} with the 404 NOT_FOUND envelope`, async () => {
        expectError(await http(s.baseUrl, method, path), 'NOT_FOUND');
      });
    }

    it('answers an unknown /trpc procedure with 404', async () => {
      const res = await http(s.baseUrl, 'GET', '/trpc/nothing.here');
      expect(res.status).to.equal(404);
      expect(res.body.error.data.code).to.equal('NOT_FOUND');
    });
  });

  describe('internal errors', () => {
    it('answers a driver failure with a generic 500 INTERNAL_ERROR on REST, /trpc and in-process', async () => {
      const owner = await createOrg(s.deps);
      const usage = s.deps.apiUsage;
      const original = usage.admit.bind(usage);
      // A real driver error, with its SQL in the message, raised inside an authenticated request.
      usage.admit = async () => {
        await s.deps.db.orm.em.fork().execute('select password_hash from no_such_table where id = 1');
      };
      try {
        const rest = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token });
        const err = expectError(rest, 'INTERNAL_ERROR');
        expect(err.message).to.equal('Internal server error');
        expect(rest.text).not.to.match(/no_such_table|password_hash/);

        const trpc = await http(s.baseUrl, 'GET', '/trpc/auth.me', { token: owner.token });
        expect(trpc.status).to.equal(500);
        expect(trpc.text).not.to.match(/no_such_table|password_hash|stack/);
        expect(trpc.text).not.to.match(LEAK_PATTERN);
        expect(trpc.body.error.data.code).to.equal('INTERNAL_ERROR');

        let thrown: any;
        await s
          .caller(owner.token)
          .auth.me()
          .catch((e: unknown) => (thrown = e));
        expect(thrown?.message).to.equal('Internal server error');
        expect(thrown?.cause?.code).to.equal('INTERNAL_ERROR');
      } finally {
        usage.admit = original;
      }
    });

    it('answers a thrown non-Error value with a generic 500', async () => {
      const owner = await createOrg(s.deps);
      const usage = s.deps.apiUsage;
      const original = usage.admit.bind(usage);
      usage.admit = async () => {
        throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432 user=admin password=hunter2'), {
          stack: 'Error: at Object.<anonymous> (/srv/app/server/db.ts:12:7)',
        });
      };
      try {
        const rest = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token });
        expectError(rest, 'INTERNAL_ERROR');
        expect(rest.text).not.to.match(/hunter2|10\.0\.0\.5/);
      } finally {
        usage.admit = original;
      }
    });
  });
});
