// Test tier: server
import { connect, createServer, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import { http } from '../support/http.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { createOrg, type TestUser } from '../support/factories.js';
import { usingPostgres } from '../support/env.js';
import { expectError } from './envelope.js';

/** A TCP relay to PostgreSQL that the test can cut, as a network failure would. */
async function relay(target: URL): Promise<{ url: string; cut(): void }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.toString(),
    cut() {
      server.close();
      for (const s of sockets) s.destroy();
    },
  };
}

describe('database unreachable (docs/api-conventions.md, "Errors": 503)', () => {
  let s: TestServer;
  let owner: TestUser;
  let cut: () => Promise<void>;
  before(async () => {
    if (usingPostgres) {
      const r = await relay(new URL(process.env.DATABASE_URL!));
      s = await startTestServer({ startJobs: false, env: { DATABASE_URL: r.url } });
      cut = async () => r.cut();
    } else {
      s = await startTestServer({ startJobs: false });
      cut = async () => {
        await s.deps.db.pglite!.close();
      };
    }
    owner = await createOrg(s.deps);
  });
  after(async () => {
    await s?.close();
  });

  it('answers 503 SERVICE_UNAVAILABLE with a generic message on /readyz, /v1, /trpc and login', async () => {
    expect((await http(s.baseUrl, 'GET', '/readyz')).status).to.equal(200);
    await cut();
    expectError(await http(s.baseUrl, 'GET', '/readyz'), 'SERVICE_UNAVAILABLE');
    const me = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token });
    expect(expectError(me, 'SERVICE_UNAVAILABLE').message).to.equal('Service temporarily unavailable');
    const login = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email: owner.email, password: owner.password },
    });
    expectError(login, 'SERVICE_UNAVAILABLE');
    const trpc = await http(s.baseUrl, 'GET', '/trpc/auth.me', { token: owner.token });
    expect(trpc.status).to.equal(503);
    expect(trpc.body.error.data.code).to.equal('SERVICE_UNAVAILABLE');
    expect(trpc.text).not.to.match(/ECONNREFUSED|closed|127\.0\.0\.1/);
    // Liveness does not depend on the database.
    expect((await http(s.baseUrl, 'GET', '/healthz')).status).to.equal(200);
  });
});
