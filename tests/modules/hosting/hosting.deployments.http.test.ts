// Test tier: server
import { expect } from 'chai';
import { appRouter } from '../../../server/router.js';
import { createInProcessContext } from '../../../server/trpc/context.js';
import { createCallerFactory } from '../../../server/trpc/init.js';
import { createOrg, createUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { startReceiver, verifyWithThirdPartyLibraries } from '../webhooks/receiver.js';
import { createWebhook } from '../webhooks/webhook-helpers.js';
import {
  deploy,
  eventsOf,
  getDeployment,
  logsOf,
  newDeployment,
  newSite,
  waitForDeployment,
} from './hosting-helpers.js';
import { waitFor } from '../../support/wait.js';

const DEPLOYMENT_KEYS = [
  'id',
  'site_id',
  'status',
  'branch',
  'commit',
  'message',
  'builder',
  'status_message',
  'url',
  'live',
  'created_at',
  'started_at',
  'completed_at',
  'duration',
];

describe('Hosting deployments over HTTP', () => {
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

  describe('POST /v1/hosting/sites/:id/deploy', () => {
    it('queues a deployment: 202, queued, a generated 40-hex commit, the site’s branch', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token, { branch: 'production' });
      const res = await deploy(s.baseUrl, owner.token, site.id);
      expect(res.status, res.text).to.equal(202);
      const d = res.body.deployment;
      expect(res.body.success).to.equal(true);
      expect(Object.keys(d).sort()).to.deep.equal([...DEPLOYMENT_KEYS].sort());
      expect(d).to.deep.include({
        site_id: site.id,
        status: 'queued',
        branch: 'production',
        message: null,
        status_message: null,
        url: null,
        live: false,
        started_at: null,
        completed_at: null,
        duration: null,
      });
      expect(d.id).to.match(/^dep_[a-z0-9]{20}$/);
      expect(d.commit).to.match(/^[0-9a-f]{40}$/);
      const got = await getDeployment(s.baseUrl, owner.token, site.id, d.id);
      expect(got.id).to.equal(d.id);
    });

    it('takes branch, message and commit (7 to 40 hex, stored lower case)', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const d = await newDeployment(s.baseUrl, owner.token, site.id, {
        branch: 'feature/login',
        message: 'Ship the login page',
        commit: 'ABCDEF1',
      });
      expect(d).to.include({ branch: 'feature/login', message: 'Ship the login page', commit: 'abcdef1' });
    });

    it('refuses a bad commit, branch or message, or an unknown field, with 400 and queues nothing', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      for (const body of [
        { commit: 'abc12' },
        { commit: 'z'.repeat(40) },
        { commit: 'a'.repeat(41) },
        { commit: 1234567 },
        { branch: '-x' },
        { message: 'm'.repeat(501) },
        { force: true },
        { id: 'site_other' },
      ]) {
        const res = await deploy(s.baseUrl, owner.token, site.id, body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error.code).to.equal('VALIDATION_ERROR');
      }
      const list = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}/deployments`, {
        token: owner.token,
      });
      expect(list.body.total).to.equal(0);
    });
  });

  describe('the simulated build', () => {
    it('goes queued → building → success, writes the log, becomes live, emits hosting.deployment.succeeded', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token, {
        name: 'Shop',
        environment_variables: { API_URL: 'https://api.example.com', SECRET_SAUCE: 'never printed' },
      });
      const queued = await newDeployment(s.baseUrl, owner.token, site.id, { message: 'First' });
      const seen = new Set<string>();
      const done = await waitFor('the deployment to succeed', async () => {
        const d = await getDeployment(s.baseUrl, owner.token, site.id, queued.id);
        seen.add(d.status);
        return d.status === 'success' ? d : undefined;
      });
      expect(seen.has('building'), [...seen].join()).to.equal(true);
      const shortId = queued.id.slice(4, 12);
      const slug = new URL(site.url).hostname.split('.')[0];
      expect(done).to.deep.include({
        status: 'success',
        url: `https://${slug}-${shortId}.sites.example.com`,
        live: true,
        status_message: null,
      });
      expect(Date.parse(done.started_at)).to.be.at.least(Date.parse(done.created_at));
      expect(Date.parse(done.completed_at)).to.be.at.least(Date.parse(done.started_at));
      expect(done.duration).to.match(/^(\d+m )?\d+s$/);

      const after = (await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token }))
        .body.site;
      expect(after).to.deep.include({
        live_deployment_id: queued.id,
        last_deployment: done.completed_at,
        preview_url: done.url,
        url: site.url,
      });

      const { logs, status, has_more } = await logsOf(s.baseUrl, owner.token, site.id, queued.id);
      expect(status).to.equal('success');
      expect(has_more).to.equal(false);
      expect(logs.map((l) => l.seq)).to.deep.equal(logs.map((_, i) => i + 1));
      const text = logs.map((l) => l.message).join('\n');
      expect(text).to.include(`Cloning ${site.git_repo}`);
      expect(text).to.include('npm install');
      expect(text).to.include('Running build command: npm run build');
      expect(text).to.include('build/');
      expect(text).to.include('API_URL, SECRET_SAUCE');
      expect(text).not.to.include('never printed');
      expect(text).to.include(`Deployment ready at ${done.url}`);
      for (const l of logs) {
        expect(Object.keys(l).sort()).to.deep.equal(['message', 'seq', 'stream', 'timestamp']);
        expect(l.stream).to.be.oneOf(['stdout', 'stderr']);
      }

      const events = await eventsOf(s.deps, owner.organizationId, 'hosting.deployment.succeeded');
      expect(events).to.have.length(1);
      expect(events[0]!.data.object).to.deep.equal(done);
    });

    it('fails a build whose command contains `exit 1`: failed, stderr, hosting.deployment.failed, nothing live', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token, { build_command: 'npm run build && exit 1' });
      const d = await newDeployment(s.baseUrl, owner.token, site.id);
      const failed = await waitForDeployment(s.baseUrl, owner.token, site.id, d.id);
      expect(failed).to.deep.include({ status: 'failed', live: false, url: null });
      expect(failed.status_message).to.include('exited with 1');
      expect(failed.duration).to.be.a('string');
      const { logs } = await logsOf(s.baseUrl, owner.token, site.id, d.id);
      expect(logs.at(-1)).to.include({ stream: 'stderr' });
      expect(logs.at(-1)!.message).to.include('exited with 1');
      expect(logs.some((l) => l.message.startsWith('Deployment ready'))).to.equal(false);
      const after = (await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token }))
        .body.site;
      expect(after).to.include({ live_deployment_id: null, last_deployment: null, preview_url: null });
      const events = (await eventsOf(s.deps, owner.organizationId)).filter((e) =>
        e.type.startsWith('hosting.'),
      );
      expect(events.map((e) => e.type)).to.deep.equal(['hosting.deployment.failed']);
      expect(events[0]!.data.object).to.deep.equal(failed);
    });

    it('uses the settings of the site when deployed: a later fix applies to the next deployment', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token, { build_command: 'exit 1' });
      const bad = await newDeployment(s.baseUrl, owner.token, site.id);
      await http(s.baseUrl, 'PUT', `/v1/hosting/sites/${site.id}`, {
        token: owner.token,
        body: { build_command: 'npm run build' },
      });
      const good = await newDeployment(s.baseUrl, owner.token, site.id);
      expect((await waitForDeployment(s.baseUrl, owner.token, site.id, bad.id)).status).to.equal('failed');
      expect((await waitForDeployment(s.baseUrl, owner.token, site.id, good.id)).status).to.equal('success');
    });

    it('builds one deployment at a time per site, oldest first; the newest success is live', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await newDeployment(s.baseUrl, owner.token, site.id)).id);
      let maxBuilding = 0;
      const all = await waitFor(
        'every deployment to succeed',
        async () => {
          const list = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}/deployments`, {
            token: owner.token,
          });
          const ds = list.body.deployments as any[];
          maxBuilding = Math.max(maxBuilding, ds.filter((d) => d.status === 'building').length);
          return ds.every((d) => d.status === 'success') ? ds : undefined;
        },
        { timeoutMs: 30_000 },
      );
      expect(maxBuilding).to.equal(1);
      const byId = new Map(all.map((d) => [d.id, d]));
      for (let i = 1; i < ids.length; i++) {
        const prev = byId.get(ids[i - 1]!);
        const next = byId.get(ids[i]!);
        expect(Date.parse(next.started_at), 'starts after the previous one ended').to.be.at.least(
          Date.parse(prev.completed_at),
        );
      }
      const after = (await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token }))
        .body.site;
      expect(after.live_deployment_id).to.equal(ids[2]);
      expect(all.filter((d) => d.live).map((d) => d.id)).to.deep.equal([ids[2]]);
    });

    it('builds the sites of one organization side by side', async () => {
      const owner = await createOrg(s.deps);
      const a = await newSite(s.baseUrl, owner.token, { name: 'a' });
      const b = await newSite(s.baseUrl, owner.token, { name: 'b' });
      const da = await deploySlowly(owner.token, a.id, 1200);
      const db = await deploySlowly(owner.token, b.id, 1200);
      await waitFor('both deployments to be building', async () => {
        const [x, y] = await Promise.all([
          getDeployment(s.baseUrl, owner.token, a.id, da.id),
          getDeployment(s.baseUrl, owner.token, b.id, db.id),
        ]);
        return x.status === 'building' && y.status === 'building';
      });
      await waitForDeployment(s.baseUrl, owner.token, a.id, da.id);
      await waitForDeployment(s.baseUrl, owner.token, b.id, db.id);
    });
  });

  describe('GET /v1/hosting/sites/:id/deployments', () => {
    it('pages newest first with total, page, limit; filters by status; each carries site_id', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token, { build_command: 'exit 1' });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await newDeployment(s.baseUrl, owner.token, site.id)).id);
      const list = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}/deployments?limit=2`, {
        token: owner.token,
      });
      expect(list.status).to.equal(200);
      expect(list.body).to.include({ success: true, total: 3, page: 1, limit: 2 });
      expect(list.body.deployments.map((d: any) => d.id)).to.deep.equal([ids[2], ids[1]]);
      for (const d of list.body.deployments) {
        expect(d.site_id).to.equal(site.id);
        expect(Object.keys(d).sort()).to.deep.equal([...DEPLOYMENT_KEYS].sort());
      }
      await waitForDeployment(s.baseUrl, owner.token, site.id, ids[2]!);
      const failed = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}/deployments?status=failed`, {
        token: owner.token,
      });
      expect(failed.body.total).to.equal(3);
      const bad = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}/deployments?status=done`, {
        token: owner.token,
      });
      expect(bad.status).to.equal(400);
    });

    it('answers 404 for a deployment of another site, even of the same owner', async () => {
      const owner = await createOrg(s.deps);
      const a = await newSite(s.baseUrl, owner.token, { name: 'a' });
      const b = await newSite(s.baseUrl, owner.token, { name: 'b' });
      const d = await newDeployment(s.baseUrl, owner.token, a.id);
      for (const path of [`/deployments/${d.id}`, `/deployments/${d.id}/logs`]) {
        const res = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${b.id}${path}`, { token: owner.token });
        expect(res.status, path).to.equal(404);
      }
      const cancel = await http(s.baseUrl, 'POST', `/v1/hosting/sites/${b.id}/deployments/${d.id}/cancel`, {
        token: owner.token,
        body: {},
      });
      expect(cancel.status).to.equal(404);
    });
  });

  describe('GET …/deployments/:deployment_id/logs (JSON)', () => {
    it('pages with after and limit, has_more and the status', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const d = await newDeployment(s.baseUrl, owner.token, site.id);
      await waitForDeployment(s.baseUrl, owner.token, site.id, d.id);
      const all = await logsOf(s.baseUrl, owner.token, site.id, d.id);
      expect(all.logs.length).to.be.greaterThan(6);
      const first = await logsOf(s.baseUrl, owner.token, site.id, d.id, '?limit=3');
      expect(first.logs.map((l) => l.seq)).to.deep.equal([1, 2, 3]);
      expect(first.has_more).to.equal(true);
      const next = await logsOf(s.baseUrl, owner.token, site.id, d.id, '?after=3&limit=3');
      expect(next.logs.map((l) => l.seq)).to.deep.equal([4, 5, 6]);
      const last = await logsOf(s.baseUrl, owner.token, site.id, d.id, `?after=${all.logs.length - 1}`);
      expect(last.logs).to.have.length(1);
      expect(last.has_more).to.equal(false);
      const past = await logsOf(s.baseUrl, owner.token, site.id, d.id, `?after=${all.logs.length + 10}`);
      expect(past).to.deep.equal({ success: true, logs: [], has_more: false, status: 'success' });
      for (const q of ['after=-1', 'after=x', 'limit=0', 'limit=1001']) {
        const res = await http(
          s.baseUrl,
          'GET',
          `/v1/hosting/sites/${site.id}/deployments/${d.id}/logs?${q}`,
          {
            token: owner.token,
          },
        );
        expect(res.status, q).to.equal(400);
      }
    });

    it('is empty while the deployment is queued', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const d = await deploySlowly(owner.token, site.id, 3000);
      const logs = await logsOf(s.baseUrl, owner.token, site.id, d.id);
      expect(logs).to.deep.equal({ success: true, logs: [], has_more: false, status: 'queued' });
    });
  });

  describe('POST …/deployments/:deployment_id/cancel', () => {
    it('cancels a queued deployment; a second cancel is 409', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const d = await deploySlowly(owner.token, site.id, 3000);
      const url = `/v1/hosting/sites/${site.id}/deployments/${d.id}/cancel`;
      const res = await http(s.baseUrl, 'POST', url, { token: owner.token, body: {} });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.deployment).to.deep.include({
        id: d.id,
        status: 'canceled',
        started_at: null,
        duration: null,
        live: false,
      });
      expect(res.body.deployment.completed_at).to.be.a('string');
      const again = await http(s.baseUrl, 'POST', url, { token: owner.token, body: {} });
      expect(again.status).to.equal(409);
      expect(again.body.error.code).to.equal('CONFLICT');
      // It never builds.
      await new Promise((r) => setTimeout(r, 400));
      expect((await getDeployment(s.baseUrl, owner.token, site.id, d.id)).status).to.equal('canceled');
    });

    it('stops a building deployment: nothing more is written, it never goes live, the next one builds', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const d = await deploySlowly(owner.token, site.id, 1600);
      const next = await newDeployment(s.baseUrl, owner.token, site.id);
      await waitForDeployment(s.baseUrl, owner.token, site.id, d.id, ['building']);
      const res = await http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/deployments/${d.id}/cancel`, {
        token: owner.token,
        body: {},
      });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.deployment.status).to.equal('canceled');
      expect(res.body.deployment.duration).to.match(/^\d+s$/);
      const atCancel = await logsOf(s.baseUrl, owner.token, site.id, d.id);
      expect(atCancel.logs.at(-1)!.message).to.equal('Build canceled');
      await new Promise((r) => setTimeout(r, 1200));
      const later = await logsOf(s.baseUrl, owner.token, site.id, d.id);
      expect(later.logs).to.deep.equal(atCancel.logs);
      expect(later.status).to.equal('canceled');
      const built = await waitForDeployment(s.baseUrl, owner.token, site.id, next.id);
      expect(built.status).to.equal('success');
      const after = (await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token }))
        .body.site;
      expect(after.live_deployment_id).to.equal(next.id);
      expect(await eventsOf(s.deps, owner.organizationId, 'hosting.deployment.failed')).to.have.length(0);
    });

    it('answers 409 for a finished deployment', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const d = await newDeployment(s.baseUrl, owner.token, site.id);
      await waitForDeployment(s.baseUrl, owner.token, site.id, d.id);
      const res = await http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/deployments/${d.id}/cancel`, {
        token: owner.token,
        body: {},
      });
      expect(res.status).to.equal(409);
      expect((await getDeployment(s.baseUrl, owner.token, site.id, d.id)).status).to.equal('success');
    });
  });

  describe('POST /v1/hosting/sites/:id/rollback', () => {
    it('makes an earlier success live again without a build; last_deployment follows; 409 otherwise', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const first = await newDeployment(s.baseUrl, owner.token, site.id);
      const second = await newDeployment(s.baseUrl, owner.token, site.id);
      const one = await waitForDeployment(s.baseUrl, owner.token, site.id, first.id);
      const two = await waitForDeployment(s.baseUrl, owner.token, site.id, second.id);
      await http(s.baseUrl, 'PUT', `/v1/hosting/sites/${site.id}`, {
        token: owner.token,
        body: { build_command: 'exit 1' },
      });
      const broken = await newDeployment(s.baseUrl, owner.token, site.id);
      await waitForDeployment(s.baseUrl, owner.token, site.id, broken.id);

      const rollback = (deployment_id: string) =>
        http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/rollback`, {
          token: owner.token,
          body: { deployment_id },
        });
      const res = await rollback(first.id);
      expect(res.status, res.text).to.equal(200);
      expect(res.body.site).to.deep.include({
        id: site.id,
        live_deployment_id: first.id,
        last_deployment: one.completed_at,
        preview_url: two.url,
      });
      expect(res.body.site.build_settings).to.be.an('object');
      const list = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}/deployments`, {
        token: owner.token,
      });
      expect(list.body.total).to.equal(3);
      expect(list.body.deployments.filter((d: any) => d.live).map((d: any) => d.id)).to.deep.equal([
        first.id,
      ]);

      for (const [id, status] of [
        [first.id, 409],
        [broken.id, 409],
        ['dep_unknown0000000000000', 404],
        ['nonsense', 404],
      ] as const) {
        const r = await rollback(id);
        expect(r.status, id).to.equal(status);
      }
      // Forward again.
      const forward = await rollback(second.id);
      expect(forward.body.site).to.include({
        live_deployment_id: second.id,
        last_deployment: two.completed_at,
      });
      const bad = await http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/rollback`, {
        token: owner.token,
        body: {},
      });
      expect(bad.status).to.equal(400);
    });

    it('answers 409 for a deployment still building', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const d = await deploySlowly(owner.token, site.id, 3000);
      const res = await http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/rollback`, {
        token: owner.token,
        body: { deployment_id: d.id },
      });
      expect(res.status).to.equal(409);
    });
  });

  describe('events to webhooks', () => {
    it('delivers hosting.deployment.succeeded and .failed with the deployment and its site_id, signed', async () => {
      const rx = await startReceiver();
      try {
        const owner = await createOrg(s.deps);
        const wh = await createWebhook(s, owner, rx.url, [
          'hosting.deployment.succeeded',
          'hosting.deployment.failed',
        ]);
        const site = await newSite(s.baseUrl, owner.token);
        const ok = await newDeployment(s.baseUrl, owner.token, site.id);
        await waitForDeployment(s.baseUrl, owner.token, site.id, ok.id);
        await http(s.baseUrl, 'PUT', `/v1/hosting/sites/${site.id}`, {
          token: owner.token,
          body: { build_command: 'npm test && exit 1' },
        });
        const ko = await newDeployment(s.baseUrl, owner.token, site.id);
        await waitForDeployment(s.baseUrl, owner.token, site.id, ko.id);
        const reqs = await rx.waitFor((r) => r.length >= 2);
        const byType = new Map(reqs.map((r) => [r.headers['x-vpn-event'], r]));
        const succeeded = byType.get('hosting.deployment.succeeded')!;
        const failed = byType.get('hosting.deployment.failed')!;
        expect(succeeded.body.data.object).to.include({ id: ok.id, site_id: site.id, status: 'success' });
        expect(failed.body.data.object).to.include({ id: ko.id, site_id: site.id, status: 'failed' });
        expect(succeeded.body.organization_id).to.equal(owner.organizationId);
        expect(await verifyWithThirdPartyLibraries(wh.secret, succeeded)).to.equal(true);
      } finally {
        await rx.close();
      }
    });

    it('accepts the hosting events in a webhook’s events and refuses an unknown one', async () => {
      const owner = await createOrg(s.deps);
      const ok = await http(s.baseUrl, 'POST', '/v1/webhooks', {
        token: owner.token,
        body: { url: 'https://hooks.example.com/h', events: ['hosting.deployment.failed'] },
      });
      expect(ok.status).to.equal(201);
      const bad = await http(s.baseUrl, 'POST', '/v1/webhooks', {
        token: owner.token,
        body: { url: 'https://hooks.example.com/h', events: ['hosting.deployment.started'] },
      });
      expect(bad.status).to.equal(400);
    });
  });

  describe('members', () => {
    it('deploy their own sites with hosting:write; read-only members get 403, and 404 for others’ sites', async () => {
      const owner = await createOrg(s.deps);
      const writer = await createUser(s.deps, owner.organizationId, { permissions: ['hosting:write'] });
      const reader = await createUser(s.deps, owner.organizationId);
      const site = await newSite(s.baseUrl, writer.token);
      const d = await newDeployment(s.baseUrl, writer.token, site.id);
      const denied = await deploy(s.baseUrl, reader.token, site.id);
      expect(denied.status).to.equal(403);
      await waitForDeployment(s.baseUrl, writer.token, site.id, d.id);
      // The reader cannot see the writer's site at all.
      const hidden = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}/deployments`, {
        token: reader.token,
      });
      expect(hidden.status).to.equal(404);
    });
  });
});
