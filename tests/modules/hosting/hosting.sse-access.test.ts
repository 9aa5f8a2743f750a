// Test tier: server
import { expect } from 'chai';
import { appRouter } from '../../../server/router.js';
import { createInProcessContext } from '../../../server/trpc/context.js';
import { createCallerFactory } from '../../../server/trpc/init.js';
import { User } from '../../../server/access/user.entity.js';
import { createOrg } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { newSite, openSse, type SseClient } from './hosting-helpers.js';

const RECHECK_MS = 200;

/**
 * An open build-log stream ends when its caller's access ends (docs/security.md): the caller is checked again every
 * EVENT_STREAM_RECHECK_INTERVAL (here 200 ms instead of 5 s).
 */
describe('build-log streams end when access ends', function () {
  this.timeout(60_000);
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ env: { EVENT_STREAM_RECHECK_INTERVAL: `${RECHECK_MS}ms` } });
  });
  after(async () => {
    await s?.close();
  });

  const logsPath = (siteId: string, id: string) => `/v1/hosting/sites/${siteId}/deployments/${id}/logs`;

  /** A deployment whose build takes long enough to stream for the whole test. */
  async function slowDeployment(token: string) {
    const site = await newSite(s.baseUrl, token);
    const deps = { ...s.deps, config: { ...s.deps.config, provisioningDelayMs: 20_000 } };
    const caller = createCallerFactory(appRouter)(createInProcessContext(deps, { token }));
    const { deployment } = await caller.hosting.sites.deploy({ id: site.id });
    return { site, deployment };
  }

  async function expectEndsUnauthorized(sse: SseClient, since: number) {
    await sse.ended;
    expect(Date.now() - since).to.be.below(RECHECK_MS * 10);
    const last = sse.events.at(-1)!;
    expect(last.event).to.equal('error');
    expect(JSON.parse(last.data)).to.deep.include({ code: 'UNAUTHORIZED' });
    expect(sse.events.some((e) => e.event === 'end')).to.equal(false);
  }

  it('ends the stream of a login that logs out', async () => {
    const owner = await createOrg(s.deps);
    const { site, deployment } = await slowDeployment(owner.token);
    const sse = await openSse(s.baseUrl, logsPath(site.id, deployment.id), { token: owner.token });
    expect(sse.status).to.equal(200);
    // Still open after a few checks while access lasts.
    await new Promise((r) => setTimeout(r, RECHECK_MS * 3));
    expect(sse.events.some((e) => e.event === 'error')).to.equal(false);
    const out = await http(s.baseUrl, 'POST', '/v1/auth/logout', { token: owner.token, body: {} });
    expect(out.status).to.equal(200);
    await expectEndsUnauthorized(sse, Date.now());
  });

  it('ends the stream of an API key that is revoked', async () => {
    const owner = await createOrg(s.deps);
    const { site, deployment } = await slowDeployment(owner.token);
    const key = await http(s.baseUrl, 'POST', '/v1/api-keys', {
      token: owner.token,
      body: { name: 'logs', permissions: ['hosting:read'] },
    });
    expect(key.status, key.text).to.equal(201);
    const sse = await openSse(s.baseUrl, logsPath(site.id, deployment.id), { token: key.body.secret });
    expect(sse.status).to.equal(200);
    const del = await http(s.baseUrl, 'DELETE', `/v1/api-keys/${key.body.api_key.id}`, {
      token: owner.token,
    });
    expect(del.status).to.equal(200);
    await expectEndsUnauthorized(sse, Date.now());
  });

  it('ends the stream of a user who is suspended', async () => {
    const owner = await createOrg(s.deps);
    const { site, deployment } = await slowDeployment(owner.token);
    const sse = await openSse(s.baseUrl, logsPath(site.id, deployment.id), { token: owner.token });
    expect(sse.status).to.equal(200);
    // An owner cannot be suspended over the API; the stored status is what every check reads.
    await s.deps.db.orm.em.fork().nativeUpdate(User, { id: owner.id }, { status: 'suspended' });
    await expectEndsUnauthorized(sse, Date.now());
  });
});
