// Test tier: server
import { expect } from 'chai';
import Fastify from 'fastify';
import { registerRestRoutes } from '../../../server/rest.js';
import { appRouter } from '../../../server/router.js';
import { createHttpContext, createInProcessContext } from '../../../server/trpc/context.js';
import { createCallerFactory, toAppError } from '../../../server/trpc/init.js';
import { testConfig, usingPostgres } from '../../support/env.js';
import { createOrg, createUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, startTestServer, type TestServer } from '../../support/server.js';
import {
  logLines,
  logsOf,
  newDeployment,
  newSite,
  openSse,
  waitForDeployment,
  type SseClient,
} from './hosting-helpers.js';
import { waitFor } from '../../support/wait.js';

const logsPath = (siteId: string, deploymentId: string, query = '') =>
  `/v1/hosting/sites/${siteId}/deployments/${deploymentId}/logs${query}`;

describe('Hosting build logs as Server-Sent Events', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  /** Deploys through a caller whose provisioning delay is `paceMs`: its build keeps that pace. */
  async function deploySlowly(token: string, siteId: string, paceMs: number) {
    const deps = { ...s.deps, config: { ...s.deps.config, provisioningDelayMs: paceMs } };
    const caller = createCallerFactory(appRouter)(createInProcessContext(deps, { token }));
    return (await caller.hosting.sites.deploy({ id: siteId })).deployment;
  }

  async function expectEndsWith(sse: SseClient, status: string) {
    await sse.ended;
    const last = sse.events.at(-1)!;
    expect(last.event).to.equal('end');
    expect(JSON.parse(last.data)).to.deep.equal({ status });
    expect(last.id).to.equal(undefined);
  }

  it('streams the lines as they are written (id: seq, event: log, JSON data), then `end`, then closes', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token);
    const d = await deploySlowly(owner.token, site.id, 1600);
    const sse = await openSse(s.baseUrl, logsPath(site.id, d.id), { token: owner.token });
    expect(sse.status).to.equal(200);
    expect(sse.headers['content-type']).to.equal('text/event-stream; charset=utf-8');
    expect(sse.headers['cache-control']).to.equal('no-store');
    expect(sse.headers['x-request-id']).to.match(/^req_/);
    expect(sse.headers['ratelimit-policy']).to.be.a('string');

    const [first] = await sse.waitFor((e) => e.length >= 1);
    // The first line arrives while the build is still going.
    expect((await logsOf(s.baseUrl, owner.token, site.id, d.id)).status).to.equal('building');
    expect(first!.event).to.equal('log');
    await expectEndsWith(sse, 'success');
    const endAt = sse.events.at(-1)!.at;
    expect(endAt - first!.at, 'lines came one step after another').to.be.greaterThan(600);

    const streamed = logLines(sse.events);
    for (const e of sse.events.filter((x) => x.event === 'log'))
      expect(e.id).to.equal(String(JSON.parse(e.data).seq));
    const stored = await logsOf(s.baseUrl, owner.token, site.id, d.id);
    expect(streamed).to.deep.equal(stored.logs);
    expect(streamed.map((l) => l.seq)).to.deep.equal(streamed.map((_, i) => i + 1));
  });

  it('delivers each line within 100 ms of its being written (median), with no polling', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token);
    const d = await deploySlowly(owner.token, site.id, 800);
    const sse = await openSse(s.baseUrl, logsPath(site.id, d.id), { token: owner.token });
    await sse.ended;
    // performance.now() and Date.now() share the clock of this process, which is the server's.
    const offset = Date.now() - performance.now();
    const delays = sse.events
      .filter((e) => e.event === 'log')
      .map((e) => e.at + offset - Date.parse(JSON.parse(e.data).timestamp))
      .sort((a, b) => a - b);
    expect(delays.length).to.be.greaterThan(5);
    expect(delays[Math.floor(delays.length / 2)]!, JSON.stringify(delays)).to.be.below(100);
  });

  it('sends what is stored and `end` at once for a finished deployment; resumes after Last-Event-ID or after', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token, { build_command: 'make && exit 1' });
    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    await waitForDeployment(s.baseUrl, owner.token, site.id, d.id);
    const stored = (await logsOf(s.baseUrl, owner.token, site.id, d.id)).logs;

    const all = await openSse(s.baseUrl, logsPath(site.id, d.id), { token: owner.token });
    await expectEndsWith(all, 'failed');
    expect(logLines(all.events)).to.deep.equal(stored);

    const resumed = await openSse(s.baseUrl, logsPath(site.id, d.id), {
      token: owner.token,
      headers: { 'last-event-id': '5' },
    });
    await expectEndsWith(resumed, 'failed');
    expect(logLines(resumed.events)).to.deep.equal(stored.slice(5));

    const after = await openSse(s.baseUrl, logsPath(site.id, d.id, '?after=3'), { token: owner.token });
    await after.ended;
    expect(logLines(after.events)).to.deep.equal(stored.slice(3));

    // Last-Event-ID (what an EventSource sends when it reconnects) wins over the URL's `after`.
    const both = await openSse(s.baseUrl, logsPath(site.id, d.id, '?after=1'), {
      token: owner.token,
      headers: { 'last-event-id': String(stored.length - 1) },
    });
    await both.ended;
    expect(logLines(both.events)).to.deep.equal(stored.slice(-1));
  });

  it('lets a client that reconnects with Last-Event-ID pick up where it left, without gaps or repeats', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token);
    const d = await deploySlowly(owner.token, site.id, 1200);
    const first = await openSse(s.baseUrl, logsPath(site.id, d.id), { token: owner.token });
    await first.waitFor((e) => e.length >= 3);
    first.close();
    const lastId = first.events.at(-1)!.id!;
    const second = await openSse(s.baseUrl, logsPath(site.id, d.id), {
      token: owner.token,
      headers: { 'last-event-id': lastId },
    });
    await expectEndsWith(second, 'success');
    const seqs = [...logLines(first.events), ...logLines(second.events)].map((l) => l.seq);
    expect(seqs).to.deep.equal(seqs.map((_, i) => i + 1));
  });

  it('answers errors before the stream in the JSON envelope (401, 403, 404, 400)', async () => {
    const owner = await createOrg(s.deps);
    const other = await createOrg(s.deps);
    const noRead = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const em = s.deps.db.orm.em.fork();
    await em.execute(`update users set permissions = '{}' where id = ?`, [noRead.id]);
    const site = await newSite(s.baseUrl, owner.token);
    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    const cases: Array<[string, { token?: string; headers?: Record<string, string> }, number, string]> = [
      [logsPath(site.id, d.id), {}, 401, 'UNAUTHORIZED'],
      [logsPath(site.id, d.id), { token: 'forged' }, 401, 'UNAUTHORIZED'],
      [logsPath(site.id, d.id), { token: noRead.token }, 403, 'FORBIDDEN'],
      [logsPath(site.id, d.id), { token: other.token }, 404, 'NOT_FOUND'],
      [logsPath(site.id, 'dep_nothing000000000000'), { token: owner.token }, 404, 'NOT_FOUND'],
      [
        logsPath(site.id, d.id),
        { token: owner.token, headers: { 'last-event-id': 'x' } },
        400,
        'VALIDATION_ERROR',
      ],
      [logsPath(site.id, d.id, '?after=-2'), { token: owner.token }, 400, 'VALIDATION_ERROR'],
    ];
    for (const [path, opts, status, code] of cases) {
      const sse = await openSse(s.baseUrl, path, opts);
      await sse.ended;
      expect(sse.status, `${path} ${JSON.stringify(opts)}`).to.equal(status);
      expect(sse.headers['content-type']).to.match(/^application\/json/);
      const body = JSON.parse(sse.text());
      expect(body.success).to.equal(false);
      expect(body.error.code).to.equal(code);
      expect(body.error.request_id).to.equal(sse.headers['x-request-id']);
      if (status === 401) expect(sse.headers['www-authenticate']).to.equal('Bearer');
    }
  });

  it('answers JSON when the client does not ask for an event stream (and over /trpc)', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token);
    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    const res = await http(s.baseUrl, 'GET', logsPath(site.id, d.id), {
      token: owner.token,
      headers: { accept: 'application/json' },
    });
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    expect(res.body.success).to.equal(true);
    const viaTrpc = await s
      .caller(owner.token)
      .hosting.deployments.logs({ id: site.id, deployment_id: d.id });
    expect(viaTrpc.success).to.equal(true);
  });

  it('releases its follower when the client goes away', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token);
    const d = await deploySlowly(owner.token, site.id, 1600);
    const hub = s.deps.modules.hosting.logHub;
    const clients = await Promise.all(
      Array.from({ length: 5 }, () => openSse(s.baseUrl, logsPath(site.id, d.id), { token: owner.token })),
    );
    await waitFor('5 listeners', () => hub.listenerCount(d.id) === 5);
    for (const c of clients) c.close();
    await waitFor('no listener left', () => hub.listenerCount(d.id) === 0, { timeoutMs: 5000 });
    // Finished streams release theirs too.
    const done = await openSse(s.baseUrl, logsPath(site.id, d.id), { token: owner.token });
    await done.ended;
    expect(hub.listenerCount(d.id)).to.equal(0);
  });

  it('gives every follower of one build the same lines', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token);
    const d = await deploySlowly(owner.token, site.id, 800);
    const clients = await Promise.all(
      Array.from({ length: 20 }, () => openSse(s.baseUrl, logsPath(site.id, d.id), { token: owner.token })),
    );
    await Promise.all(clients.map((c) => c.ended));
    const stored = (await logsOf(s.baseUrl, owner.token, site.id, d.id)).logs;
    for (const c of clients) {
      expect(logLines(c.events)).to.deep.equal(stored);
      expect(c.events.at(-1)!.event).to.equal('end');
    }
  });

  it('ends with `canceled` when the build is canceled, and when its site is deleted', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token);
    const d = await deploySlowly(owner.token, site.id, 2000);
    const sse = await openSse(s.baseUrl, logsPath(site.id, d.id), { token: owner.token });
    await sse.waitFor((e) => e.length >= 1);
    const cancel = await http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/deployments/${d.id}/cancel`, {
      token: owner.token,
      body: {},
    });
    expect(cancel.status).to.equal(200);
    await expectEndsWith(sse, 'canceled');
    expect(logLines(sse.events).at(-1)!.message).to.equal('Build canceled');

    const d2 = await deploySlowly(owner.token, site.id, 2000);
    const sse2 = await openSse(s.baseUrl, logsPath(site.id, d2.id), { token: owner.token });
    const del = await http(s.baseUrl, 'DELETE', `/v1/hosting/sites/${site.id}`, { token: owner.token });
    expect(del.status).to.equal(200);
    await expectEndsWith(sse2, 'canceled');
  });

  it('sends a heartbeat comment on an idle stream', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token);
    const d = await deploySlowly(owner.token, site.id, 4000);
    // The same routes on a server of their own, with a heartbeat every 100 ms instead of 15 s.
    const app = Fastify({ logger: false });
    registerRestRoutes(app, {
      router: appRouter,
      basePath: '/v1',
      locationBase: 'http://localhost/v1',
      eventStreamHeartbeatMs: 100,
      createContext: (req) => createHttpContext(s.deps, req),
      sendError: (_req, reply, err) => {
        const e = toAppError(err);
        return reply.status(e.status).send({ success: false, error: { code: e.code, message: e.message } });
      },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const address = app.server.address() as { port: number };
      const sse = await openSse(`http://127.0.0.1:${address.port}`, logsPath(site.id, d.id), {
        token: owner.token,
      });
      await waitFor('3 comments', () => sse.comments.length >= 3, { timeoutMs: 5000 });
      expect(sse.comments[0]).to.match(/^:/);
      expect(sse.events.filter((e) => e.event === 'log')).to.have.length(0);
      sse.close();
    } finally {
      // Ends the streams still open, so the close does not wait for them.
      await app.close();
    }
    await http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/deployments/${d.id}/cancel`, {
      token: owner.token,
      body: {},
    });
  });

  it('ends open streams when the server closes, so the close does not hang', async () => {
    const own = await startTestServer();
    let closed = false;
    try {
      const owner = await createOrg(own.deps);
      const site = await newSite(own.baseUrl, owner.token);
      const deps = { ...own.deps, config: { ...own.deps.config, provisioningDelayMs: 20_000 } };
      const caller = createCallerFactory(appRouter)(createInProcessContext(deps, { token: owner.token }));
      const { deployment } = await caller.hosting.sites.deploy({ id: site.id });
      const sse = await openSse(own.baseUrl, logsPath(site.id, deployment.id), { token: owner.token });
      const started = Date.now();
      await own.close();
      closed = true;
      await sse.ended;
      expect(Date.now() - started).to.be.below(10_000);
      expect(sse.events.some((e) => e.event === 'end')).to.equal(false);
    } finally {
      if (!closed) await own.close();
    }
  });

  describe('across processes (PostgreSQL)', () => {
    it('streams to a follower on another process, woken by NOTIFY on one shared listener', async function () {
      if (!usingPostgres) this.skip();
      // A second process on the same database that runs no jobs: every line it streams was written elsewhere.
      const other = await startTestServer({ config: testConfig(), startJobs: false });
      const hub = other.deps.modules.hosting.logHub;
      await hub.start();
      try {
        const owner = await createOrg(s.deps);
        const site = await newSite(s.baseUrl, owner.token);
        const d = await deploySlowly(owner.token, site.id, 1200);
        const sse = await openSse(other.baseUrl, logsPath(site.id, d.id), { token: owner.token });
        const [first] = await sse.waitFor((e) => e.length >= 1);
        expect((await logsOf(s.baseUrl, owner.token, site.id, d.id)).status).to.equal('building');
        expect(first!.event).to.equal('log');
        await expectEndsWith(sse, 'success');
        const stored = (await logsOf(s.baseUrl, owner.token, site.id, d.id)).logs;
        expect(logLines(sse.events)).to.deep.equal(stored);
      } finally {
        await other.close();
      }
    });
  });
});
