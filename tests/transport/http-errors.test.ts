// Test tier: server
import { expect } from 'chai';
import type { FastifyInstance } from 'fastify';
import { buildApp, MAX_PATH_PARAM_LENGTH, REQUEST_TIMEOUT_MS } from '../../server/app.js';
import { startServices, stopServices } from '../../server/services.js';
import type { AppDeps } from '../../server/kit/deps.js';
import { contractObserver } from '../support/contract.js';
import { testConfig } from '../support/env.js';
import { createOrg, type TestUser } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { expectError } from './envelope.js';
import { rawConnection, rawExchange, rawRequest } from './raw.js';

// Errors raised by Node's HTTP server or by Fastify before any procedure runs: the same envelope and X-Request-Id as
// every other error (docs/api-conventions.md "Errors"), with the status HTTP gives them.
describe('errors raised before a procedure runs', () => {
  let s: TestServer;
  let owner: TestUser;
  before(async () => {
    s = await sharedServer();
    owner = await createOrg(s.deps);
  });

  const get = (path: string, headers: Record<string, string> = {}) =>
    rawRequest(`${s.baseUrl}${path}`, { headers: { authorization: `Bearer ${owner.token}`, ...headers } });

  describe('URLs', () => {
    it('answers a malformed percent-encoding in the path with 400 VALIDATION_ERROR', async () => {
      const err = expectError(await get('/v1/vpn/connections/%E0%A4%A'), 'VALIDATION_ERROR');
      expect(err.message).to.match(/URL/);
      expectError(await get('/nothing-here/%E0%A4%A'), 'VALIDATION_ERROR');
    });

    it('keeps a valid incoming X-Request-Id on that answer', async () => {
      const res = await get('/v1/vpn/connections/%E0%A4%A', { 'x-request-id': 'bad-url-1' });
      expect(expectError(res, 'VALIDATION_ERROR').request_id).to.equal('bad-url-1');
    });

    it(`answers an id of ${MAX_PATH_PARAM_LENGTH} characters 404 and a 3,000-character one 414`, async () => {
      expectError(await get(`/v1/vpn/connections/${'a'.repeat(MAX_PATH_PARAM_LENGTH)}`), 'NOT_FOUND');
      const res = await get(`/v1/vpn/connections/${'a'.repeat(3000)}`);
      expectError(res, 'VALIDATION_ERROR', 414);
      expect(res.headers['cache-control']).to.equal('no-store');
    });

    it('answers an unknown route with the 404 envelope, whatever the method', async () => {
      for (const method of ['GET', 'POST', 'PATCH', 'OPTIONS']) {
        const res = await rawRequest(`${s.baseUrl}/v1/nowhere/${method}`, { method });
        expectError(res, 'NOT_FOUND');
      }
    });
  });

  describe("refused by Node's HTTP parser (raw connections)", () => {
    it('answers a header block over the limit with 431 and closes the connection', async () => {
      const res = await rawExchange(
        s.port,
        `GET /v1/auth/me HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      );
      expectError(res, 'VALIDATION_ERROR', 431);
      expect(res.headers.connection).to.equal('close');
      expect(res.body.error.request_id).to.match(/^req_[a-z0-9]{20}$/);
    });

    it('answers a request line over the limit (a 20,000-character URL) with 431', async () => {
      const res = await rawExchange(
        s.port,
        `GET /v1/auth/me?q=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
      );
      expectError(res, 'VALIDATION_ERROR', 431);
    });

    it("answers a malformed chunked body with 400 INVALID_JSON and the request's own id", async () => {
      const res = await rawExchange(
        s.port,
        'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
          'Transfer-Encoding: chunked\r\nX-Request-Id: chunked-1\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
      );
      expect(expectError(res, 'INVALID_JSON').request_id).to.equal('chunked-1');
    });

    it('answers a body shorter than its chunk size said with 400 INVALID_JSON', async () => {
      const res = await rawExchange(
        s.port,
        'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
          'Transfer-Encoding: chunked\r\n\r\n2\r\n{}}}}\r\n0\r\n\r\n',
      );
      expectError(res, 'INVALID_JSON');
    });

    for (const [label, request] of [
      ['an invalid method', 'G@T /healthz HTTP/1.1\r\nHost: x\r\n\r\n'],
      ['a header without a colon', 'GET /healthz HTTP/1.1\r\nHost: x\r\nbroken header\r\n\r\n'],
      ['a NUL in a header value', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n'],
      [
        'Content-Length and chunked together',
        'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}',
      ],
      ['an invalid HTTP version', 'GET /healthz HTTP/9.9x\r\nHost: x\r\n\r\n'],
    ] as const) {
      it(`answers ${label} with 400 VALIDATION_ERROR or INVALID_JSON`, async () => {
        const res = await rawExchange(s.port, request);
        expect(res.status, res.text).to.equal(400);
        expectError(res, res.body?.error?.code === 'INVALID_JSON' ? 'INVALID_JSON' : 'VALIDATION_ERROR');
      });
    }
  });

  describe('request bodies', () => {
    const login = (headers: Record<string, string>, body = '{"email":"a@b.test","password":"12345678"}') =>
      rawRequest(`${s.baseUrl}/v1/auth/login`, { method: 'POST', headers, body });

    for (const ct of [
      'application/json; charset=utf-16',
      'application/json; charset=UTF-16LE',
      'application/json;charset=iso-8859-1',
      'application/json; charset="latin1"',
      'application/json; charset=us-ascii',
    ]) {
      it(`refuses a body sent as ${ct} with 415`, async () => {
        const err = expectError(await login({ 'content-type': ct }), 'UNSUPPORTED_MEDIA_TYPE');
        expect(err.message).to.match(/UTF-8/);
      });
    }

    it('accepts charset=utf-8 however it is written', async () => {
      for (const ct of [
        'application/json; charset="utf-8"',
        'application/json; Charset=UTF8',
        'application/json; charset=utf-8; foo=bar',
      ]) {
        const res = await login({ 'content-type': ct });
        expect(res.status, `${ct}: ${res.text}`).to.equal(401);
      }
    });

    for (const encoding of ['gzip', 'br', 'deflate', 'gzip, identity', 'x-custom']) {
      it(`refuses a body with Content-Encoding: ${encoding} with 415 (REST and /trpc)`, async () => {
        expectError(
          await login({ 'content-type': 'application/json', 'content-encoding': encoding }),
          'UNSUPPORTED_MEDIA_TYPE',
        );
        const trpc = await rawRequest(`${s.baseUrl}/trpc/auth.login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-encoding': encoding },
          body: '{"email":"a@b.test","password":"12345678"}',
        });
        expectError(trpc, 'UNSUPPORTED_MEDIA_TYPE');
      });
    }

    it('accepts Content-Encoding: identity, and ignores encodings on bodiless requests', async () => {
      const res = await login({ 'content-type': 'application/json', 'content-encoding': 'identity' });
      expect(res.status, res.text).to.equal(401);
      const me = await get('/v1/auth/me', {
        'content-encoding': 'gzip',
        'content-type': 'application/json; charset=latin1',
      });
      expect(me.status, me.text).to.equal(200);
    });
  });
});

describe('request timeout and draining', () => {
  const TIMEOUT_MS = 300;
  let deps: AppDeps;
  let app: FastifyInstance;
  let port: number;
  let closed = false;
  before(async () => {
    const config = testConfig();
    deps = await startServices(config, {
      pgliteDataDir: config.databaseUrl ? undefined : 'memory://',
      startJobs: false,
    });
    app = await buildApp(deps, { requestTimeoutMs: TIMEOUT_MS, observeResponse: contractObserver });
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as { port: number }).port;
  });
  after(async () => {
    if (!closed) await app?.close();
    if (deps) await stopServices(deps);
  });

  it('gives a request 60 s to arrive whole by default (request line, headers and body)', async () => {
    const s = await sharedServer();
    expect(REQUEST_TIMEOUT_MS).to.equal(60_000);
    expect(s.app.server.requestTimeout).to.equal(REQUEST_TIMEOUT_MS);
    expect(s.app.server.headersTimeout).to.equal(REQUEST_TIMEOUT_MS);
  });

  it("answers a body that trickles in past the timeout with 408 and the request's id, at the timeout", async () => {
    const conn = rawConnection(port);
    const started = Date.now();
    await conn.write(
      'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nX-Request-Id: slow-body-1\r\n' +
        'Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{"email":',
    );
    const [res] = await conn.closed;
    const elapsed = Date.now() - started;
    expect(expectError(res!, 'VALIDATION_ERROR', 408).request_id).to.equal('slow-body-1');
    expect(res!.headers.connection).to.equal('close');
    // Node checks its connections every quarter of the timeout here (every second at 60 s), not every 30 s.
    expect(elapsed).to.be.within(TIMEOUT_MS - 20, TIMEOUT_MS * 2);
  });

  it('answers headers that trickle in past the timeout with 408', async () => {
    const conn = rawConnection(port);
    await conn.write('GET /v1/auth/me HTTP/1.1\r\nHost: x\r\n');
    const [res] = await conn.closed;
    expect(expectError(res!, 'VALIDATION_ERROR', 408).request_id).to.match(/^req_/);
  });

  it('answers requests arriving on open connections while the server drains with 503 SERVICE_UNAVAILABLE', async () => {
    const conn = rawConnection(port);
    // A request in flight (its body not complete) keeps the connection open while the close begins.
    await conn.write(
      'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{',
    );
    await new Promise((r) => setTimeout(r, 30));
    closed = true;
    const closing = app.close();
    await new Promise((r) => setTimeout(r, 30));
    // The end of that body, and a second request pipelined behind it.
    await conn.write('}GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: draining-2\r\n\r\n');
    const [first, second] = await conn.responses(2);
    await closing;
    expectError(first!, 'VALIDATION_ERROR');
    const err = expectError(second!, 'SERVICE_UNAVAILABLE');
    expect(err.request_id).to.equal('draining-2');
    expect(second!.headers.connection).to.equal('close');
  });
});
