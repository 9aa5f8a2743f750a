// Test tier: unit
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Actor } from '../../../server/access/actor.js';
import type { ActorContext, AppDeps } from '../../../server/kit/deps.js';
import type { AppError } from '../../../server/lib/errors.js';
import {
  DirectoryArtifactStore,
  type ArtifactStore,
} from '../../../server/modules/hosting/artifact-store.js';
import { BuildLogHub } from '../../../server/modules/hosting/build-logs.js';
import {
  canTransition,
  transition,
  DEPLOYMENT_TRANSITIONS,
  type DeploymentStatus,
} from '../../../server/modules/hosting/deployment-state.js';
import * as deployments from '../../../server/modules/hosting/deployments.service.js';
import { newEdgeTrafficCounters } from '../../../server/modules/hosting/edge-traffic.js';
import type { ProcessHostingDriver, RealBuildSpec } from '../../../server/modules/hosting/hosting.driver.js';
import { advanceBuilds } from '../../../server/modules/hosting/builds.service.js';
import type { BuildJobData } from '../../../server/modules/hosting/hosting.jobs.js';
import type { HostingRuntime } from '../../../server/modules/hosting/hosting.module.js';
import * as sites from '../../../server/modules/hosting/sites.service.js';
import { SimulatedHostingDriver } from '../../../server/modules/hosting/simulated-hosting.driver.js';
import { openEnvironment } from '../../../server/modules/hosting/site-environment.js';
import { InMemoryHostingRepository } from './in-memory-hosting.repository.js';
import { NO_EM } from '../../support/in-memory.js';
import { appRejection, unitActor } from '../../support/unit.js';

/**
 * The hosting services against an in-memory repository (./in-memory-hosting.repository.ts): no server, no
 * database. The job queue is a list the test drains by running the build chain's job itself.
 */

// A public address literal: the address rules pass it without a DNS lookup.
const REPO = 'https://93.184.215.14/acme/web.git';
const page = { page: 1, limit: 20 } as const;

interface Harness {
  deps: AppDeps;
  repo: InMemoryHostingRepository;
  jobs: BuildJobData[];
  removed: string[];
  collected: number;
  clock: { t: number };
  ctx(actor: Actor): ActorContext;
  /** Runs queued build jobs until none is left (each as the queue would). */
  drain(): Promise<void>;
}

function harness(opts: { builder?: 'simulated' | 'local'; driver?: HostingRuntime['driver'] } = {}): Harness {
  const repo = new InMemoryHostingRepository();
  const jobs: BuildJobData[] = [];
  const clock = { t: Date.parse('2026-11-01T00:00:00.000Z') };
  const h = { removed: [] as string[], collected: 0 };
  const artifacts: ArtifactStore = {
    put: () => Promise.reject(new Error('not used')),
    manifest: () => Promise.resolve(null),
    contentPath: () => '',
    remove: async (id) => void h.removed.push(id),
    deploymentIds: async () => [],
    collectGarbage: async () => {
      h.collected += 1;
      return 0;
    },
  };
  const silent = () => undefined;
  const deps = {
    config: {
      sitesDomain: 'sites.test',
      provisioningDelayMs: 0,
      webhook: { allowPrivateTargets: false },
      hosting: { builder: opts.builder ?? 'simulated', buildLogMaxLines: 20_000 },
    },
    clock: { now: () => new Date(clock.t) },
    keys: { secrets: randomBytes(32), idempotency: randomBytes(32) },
    log: { info: silent, warn: silent, error: silent, debug: silent },
    jobs: {
      send: async (_job: unknown, data: BuildJobData) => {
        jobs.push(data);
        return 'job';
      },
      notify: silent,
    },
  } as unknown as AppDeps;
  const runtime: HostingRuntime = {
    repository: repo,
    driver: opts.driver ?? new SimulatedHostingDriver({ allowPrivate: false }),
    logHub: new BuildLogHub(deps),
    artifacts,
    builds: new Map(),
    edgeRoutes: new Map(),
    traffic: newEdgeTrafficCounters(),
    edge: { server: undefined, port: undefined },
  };
  (deps as { modules: unknown }).modules = { hosting: runtime };
  return {
    deps,
    repo,
    jobs,
    clock,
    get removed() {
      return h.removed;
    },
    get collected() {
      return h.collected;
    },
    ctx: (actor) => ({ em: NO_EM, deps, actor, requestId: 'req', ip: '127.0.0.1', userAgent: undefined }),
    async drain() {
      for (let i = 0; i < 100 && jobs.length > 0; i++) {
        clock.t += 1000;
        await advanceBuilds(deps, jobs.shift()!);
      }
    },
  };
}

const actor = (role: Actor['role'] = 'owner', organizationId?: string): Actor =>
  unitActor({ role, organizationId });

const create = (h: Harness, a: Actor, body: Record<string, unknown> = {}) =>
  sites.createSite(h.ctx(a), { name: 'Web', git_repo: REPO, framework: 'react', ...body } as never);

describe('Hosting services (unit, in-memory repository)', () => {
  describe('sites', () => {
    it('creates a site with a unique slug, the framework defaults and its variables sealed at rest', async () => {
      const h = harness();
      const a = actor();
      h.repo.setPlan(a.organizationId, 'pro');
      const first = await create(h, a, { environment_variables: { API_KEY: 'secret-value' } });
      expect(first.site).to.include({ name: 'Web', url: 'https://web.sites.test' });
      expect(first.site.build_settings).to.include({
        build_command: 'npm run build',
        output_directory: 'build',
      });
      expect(first.site.environment_variables).to.deep.equal({ API_KEY: 'secret-value' });
      const stored = h.repo.sites[0]!.environmentVariables;
      expect(stored).to.be.a('string').and.not.include('secret-value');
      expect(openEnvironment(h.deps, stored)).to.deep.equal({ API_KEY: 'secret-value' });
      // Another organization naming its site alike gets the next address.
      const other = await create(h, actor());
      expect(other.site.url).to.equal('https://web-2.sites.test');
    });

    it('refuses a domain under the platform (400, one wording) and a domain verified by another site (409)', async () => {
      const h = harness();
      const a = actor();
      h.repo.setPlan(a.organizationId, 'pro');
      const own = await appRejection(create(h, a, { domain: 'shop.sites.test' }));
      expect(own.code).to.equal('VALIDATION_ERROR');
      expect(own.message).to.match(/^Invalid request: domain: addresses under sites\.test/);
      expect(own.details).to.deep.equal([{ path: 'domain', message: own.message.slice(25) }]);
      const first = await create(h, a, { domain: 'www.example.org' });
      // A pending claim blocks no one (docs/sites.md, "Custom domains"); a verified one does.
      const pending = await create(h, actor(), { domain: 'www.example.org' });
      expect(pending.site.domain_verification!.status).to.equal('pending');
      h.repo.sites.find((x) => x.id === first.site.id)!.domainVerifiedAt = new Date();
      const taken = await appRejection(create(h, actor(), { domain: 'www.example.org' }));
      expect(taken.code).to.equal('CONFLICT');
      expect(taken.details).to.deep.equal([{ path: 'domain', message: 'Already verified by another site' }]);
    });

    it('holds the plan limit: 402 with {resource, limit, current}', async () => {
      const h = harness();
      const a = actor();
      h.repo.setPlan(a.organizationId, 'starter');
      let made = 0;
      for (;;) {
        try {
          await create(h, a);
          made += 1;
        } catch (err) {
          const e = err as AppError;
          expect(e.code).to.equal('PLAN_LIMIT_EXCEEDED');
          expect(e.details).to.deep.equal([{ resource: 'hosting_sites', limit: made, current: made }]);
          break;
        }
        expect(made).to.be.below(100);
      }
      expect(h.repo.sites).to.have.length(made);
    });

    it('updates the fields given, replaces the variables, and hides other organizations’ and users’ sites', async () => {
      const h = harness();
      const owner = actor();
      h.repo.setPlan(owner.organizationId, 'pro');
      const { site } = await create(h, owner, { environment_variables: { A: 'one1' } });
      const updated = await sites.updateSite(h.ctx(owner), {
        id: site.id,
        name: 'Renamed',
        branch: 'release',
        environment_variables: { B: 'two2' },
      });
      expect(updated.site).to.include({ name: 'Renamed', branch: 'release', url: site.url });
      expect(updated.site.environment_variables).to.deep.equal({ B: 'two2' });
      const stranger = await appRejection(sites.getSite(h.ctx(actor()), { id: site.id }));
      expect(stranger.code).to.equal('NOT_FOUND');
      expect(stranger.message).to.match(/^Site not found/);
      const member = actor('member', owner.organizationId);
      expect((await appRejection(sites.getSite(h.ctx(member), { id: site.id }))).code).to.equal('NOT_FOUND');
      const list = await sites.listSites(h.ctx(member), { ...page, user_id: owner.userId });
      expect(list.sites).to.deep.equal([]);
      const all = await sites.listSites(h.ctx(owner), { ...page });
      expect(all.sites.map((s) => s.id)).to.deep.equal([site.id]);
    });

    it('deletes a site with its deployments, cancels its builds for followers, and removes its artifacts', async () => {
      const h = harness();
      const a = actor();
      h.repo.setPlan(a.organizationId, 'pro');
      const { site } = await create(h, a);
      const built = await deployments.deploy(h.ctx(a), { id: site.id });
      await h.drain();
      const pending = await deployments.deploy(h.ctx(a), { id: site.id });
      const ends: string[] = [];
      h.deps.modules.hosting.logHub.subscribe(pending.deployment.id, (e) => {
        if (e !== 'closing' && e.status) ends.push(e.status);
      });
      const res = await sites.deleteSite(h.ctx(a), { id: site.id });
      expect(res).to.include({ success: true, id: site.id });
      expect(h.repo.sites).to.deep.equal([]);
      expect(h.repo.deployments).to.deep.equal([]);
      expect(ends).to.deep.equal(['canceled']);
      expect(h.removed.sort()).to.deep.equal([built.deployment.id, pending.deployment.id].sort());
      expect(h.collected).to.equal(1);
      // The time it served stays for the usage report.
      expect(h.repo.usage.map((u) => u.kind)).to.include('site');
    });
  });

  describe('deployments', () => {
    it('deploy queues a build (202 body), the chain builds it to success: live, logged, event recorded', async () => {
      const h = harness();
      const a = actor();
      h.repo.setPlan(a.organizationId, 'pro');
      const { site } = await create(h, a, { environment_variables: { TOKEN: 'abcd-secret' } });
      const { deployment } = await deployments.deploy(h.ctx(a), { id: site.id, message: 'first' });
      expect(deployment).to.include({
        status: 'queued',
        live: false,
        builder: 'simulated',
        message: 'first',
      });
      expect(h.jobs).to.have.length(1);
      await h.drain();
      const done = await deployments.getDeployment(h.ctx(a), { id: site.id, deployment_id: deployment.id });
      expect(done.deployment).to.include({ status: 'success', live: true });
      expect(done.deployment.duration).to.be.a('string');
      const logs = await deployments.getLogs(h.ctx(a), {
        id: site.id,
        deployment_id: deployment.id,
        after: 0,
        limit: 100,
      });
      const messages = logs.logs.map((l) => l.message);
      expect(messages).to.include('Injecting 1 environment variable: TOKEN');
      expect(JSON.stringify(logs.logs)).not.to.include('abcd-secret');
      expect(messages.at(-1)).to.match(/^Deployment ready at https:\/\/web-/);
      expect(h.repo.events.map((e) => e.type)).to.deep.equal(['hosting.deployment.succeeded']);
      expect(h.repo.usage.map((u) => u.kind)).to.deep.equal(['build']);
      expect((await sites.getSite(h.ctx(a), { id: site.id })).site.live_deployment_id).to.equal(
        deployment.id,
      );
    });

    it('builds one deployment at a time, oldest first; a failing build records its event and the site keeps serving', async () => {
      const h = harness();
      const a = actor();
      h.repo.setPlan(a.organizationId, 'pro');
      const { site } = await create(h, a);
      const first = (await deployments.deploy(h.ctx(a), { id: site.id })).deployment;
      // A second later: "oldest first" is by creation time (the same millisecond is ordered by id, as in the database).
      h.clock.t += 1000;
      await sites.updateSite(h.ctx(a), { id: site.id, build_command: 'npm run build && exit 1' });
      const second = (await deployments.deploy(h.ctx(a), { id: site.id })).deployment;
      // The second deployment joins the running chain rather than starting one.
      expect(h.jobs).to.have.length(1);
      await h.drain();
      const [d1, d2] = h.repo.deployments;
      expect([d1!.id, d1!.status, d2!.id, d2!.status]).to.deep.equal([
        first.id,
        'success',
        second.id,
        'failed',
      ]);
      expect(d2!.startedAt!.getTime()).to.be.at.least(d1!.completedAt!.getTime());
      expect(d2!.statusMessage).to.match(/exited with 1/);
      expect(h.repo.events.map((e) => e.type)).to.deep.equal([
        'hosting.deployment.succeeded',
        'hosting.deployment.failed',
      ]);
      expect(h.repo.sites[0]!.liveDeploymentId).to.equal(first.id);
    });

    it('cancel: a queued or building deployment becomes canceled and never live; a finished one is 409', async () => {
      const h = harness();
      const a = actor();
      h.repo.setPlan(a.organizationId, 'pro');
      const { site } = await create(h, a);
      const queued = (await deployments.deploy(h.ctx(a), { id: site.id })).deployment;
      const canceled = await deployments.cancelDeployment(h.ctx(a), {
        id: site.id,
        deployment_id: queued.id,
      });
      expect(canceled.deployment).to.include({ status: 'canceled', status_message: 'Canceled by request' });
      await h.drain();
      expect(h.repo.deployments[0]!.status).to.equal('canceled');
      expect(h.repo.sites[0]!.liveDeploymentId).to.equal(null);

      const building = (await deployments.deploy(h.ctx(a), { id: site.id })).deployment;
      await advanceBuilds(h.deps, h.jobs.shift()!);
      expect(h.repo.deployments[1]!.status).to.equal('building');
      await deployments.cancelDeployment(h.ctx(a), { id: site.id, deployment_id: building.id });
      await h.drain();
      const logs = h.repo.logs.get(building.id)!.map((l) => l.message);
      expect(logs.at(-1)).to.equal('Build canceled');
      expect(h.repo.deployments[1]!.status).to.equal('canceled');

      const again = await appRejection(
        deployments.cancelDeployment(h.ctx(a), { id: site.id, deployment_id: building.id }),
      );
      expect(again.code).to.equal('CONFLICT');
      expect(again.message).to.equal(
        'The deployment is canceled: only a queued or building one can be canceled',
      );
      const unknown = await appRejection(
        deployments.cancelDeployment(h.ctx(a), { id: site.id, deployment_id: 'dep_nothing' }),
      );
      expect(unknown.message).to.match(/^Deployment not found/);
    });

    it('rollback makes an earlier success live again without a build; anything else is 409', async () => {
      const h = harness();
      const a = actor();
      h.repo.setPlan(a.organizationId, 'pro');
      const { site } = await create(h, a);
      const first = (await deployments.deploy(h.ctx(a), { id: site.id })).deployment;
      await h.drain();
      const second = (await deployments.deploy(h.ctx(a), { id: site.id })).deployment;
      await h.drain();
      expect(h.repo.sites[0]!.liveDeploymentId).to.equal(second.id);
      const back = await deployments.rollback(h.ctx(a), { id: site.id, deployment_id: first.id });
      expect(back.site.live_deployment_id).to.equal(first.id);
      expect(h.jobs).to.deep.equal([]);
      const live = await appRejection(
        deployments.rollback(h.ctx(a), { id: site.id, deployment_id: first.id }),
      );
      expect(live.message).to.equal('The deployment is already live');
      const queued = (await deployments.deploy(h.ctx(a), { id: site.id })).deployment;
      const notDone = await appRejection(
        deployments.rollback(h.ctx(a), { id: site.id, deployment_id: queued.id }),
      );
      expect(notDone.code).to.equal('CONFLICT');
      expect(notDone.message).to.equal(
        'The deployment is queued: only a successful deployment can be made live again',
      );
    });

    it('lists deployments newest first with the total, filtered by status', async () => {
      const h = harness();
      const a = actor();
      h.repo.setPlan(a.organizationId, 'pro');
      const { site } = await create(h, a);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        h.clock.t += 1000;
        ids.push((await deployments.deploy(h.ctx(a), { id: site.id })).deployment.id);
      }
      const list = await deployments.listDeployments(h.ctx(a), { id: site.id, ...page });
      expect(list.deployments.map((d) => d.id)).to.deep.equal([...ids].reverse());
      expect(list.total).to.equal(3);
      const none = await deployments.listDeployments(h.ctx(a), {
        id: site.id,
        status: 'success',
        ...page,
      } as never);
      expect(none.total).to.equal(0);
    });

    it('a real builder gets the names of the site’s variables with their values (not an empty list)', async () => {
      let seen: RealBuildSpec | undefined;
      const driver: ProcessHostingDriver = {
        kind: 'process',
        concurrency: 1,
        build: async (spec, io) => {
          seen = spec;
          io.output([{ stream: 'stdout', message: 'built' }]);
          return { state: 'succeeded', files: 1, bytes: 1 };
        },
      };
      const h = harness({ builder: 'local', driver });
      const a = actor();
      h.repo.setPlan(a.organizationId, 'pro');
      const { site } = await create(h, a, { environment_variables: { API_TOKEN: 'tok-1234', MODE: 'prod' } });
      const { deployment } = await deployments.deploy(h.ctx(a), { id: site.id });
      await advanceBuilds(h.deps, h.jobs.shift()!);
      await h.deps.modules.hosting.builds.get(deployment.id)?.done;
      expect(seen?.environment).to.deep.equal({ API_TOKEN: 'tok-1234', MODE: 'prod' });
      expect(seen?.environmentVariableNames).to.deep.equal(['API_TOKEN', 'MODE']);
      expect(h.repo.deployments[0]!.status).to.equal('success');
    });
  });

  describe('the deployment state machine (deployment-state.ts)', () => {
    const all: DeploymentStatus[] = ['queued', 'building', 'success', 'failed', 'canceled'];

    it('allows exactly queued → building | canceled and building → success | failed | canceled', () => {
      const allowed = all.flatMap((from) =>
        all.filter((to) => canTransition(from, to)).map((to) => `${from}>${to}`),
      );
      expect(allowed).to.deep.equal([
        'queued>building',
        'queued>canceled',
        'building>success',
        'building>failed',
        'building>canceled',
      ]);
      for (const final of ['success', 'failed', 'canceled'] as const)
        expect(DEPLOYMENT_TRANSITIONS[final]).to.deep.equal([]);
    });

    it('applies a transition (times, reason) and refuses the others with a 409, changing nothing', () => {
      const t0 = new Date('2026-11-01T00:00:00Z');
      const t1 = new Date('2026-11-01T00:01:00Z');
      const d = {
        status: 'queued' as DeploymentStatus,
        statusMessage: null,
        startedAt: null,
        completedAt: null,
        updatedAt: t0,
      };
      transition(d, 'building', t0);
      expect(d).to.deep.include({ status: 'building', startedAt: t0 });
      transition(d, 'failed', t1, 'x'.repeat(600));
      expect(d.completedAt).to.equal(t1);
      expect(d.statusMessage).to.have.length(500);
      let refused: AppError | undefined;
      try {
        transition(d, 'success', t1);
      } catch (err) {
        refused = err as AppError;
      }
      expect(refused?.code).to.equal('CONFLICT');
      expect(refused?.message).to.equal('The deployment is failed: only a building one can succeed');
      expect(d.status).to.equal('failed');
    });
  });

  describe('the artifact store (artifact-store.ts)', () => {
    it('removes a deployment’s artifact and collects the contents no manifest uses, keeping shared and recent ones', async () => {
      const root = mkdtempSync(join(tmpdir(), 'artifacts-unit-'));
      try {
        const store = new DirectoryArtifactStore(join(root, 'store'), 10_000_000, 60_000);
        const out = (name: string, files: Record<string, string>) => {
          const dir = join(root, name);
          mkdirSync(dir);
          for (const [p, body] of Object.entries(files)) writeFileSync(join(dir, p), body);
          return dir;
        };
        const a = await store.put('dep_a', out('a', { 'index.html': 'shared page', 'a.txt': 'only in a' }));
        await store.put('dep_b', out('b', { 'index.html': 'shared page', 'b.txt': 'only in b' }));
        const objects = () =>
          readdirSync(join(root, 'store', 'objects'), { recursive: true, withFileTypes: true })
            .filter((e) => e.isFile())
            .map((e) => join(e.parentPath, e.name));
        expect(objects()).to.have.length(3);
        await store.remove('dep_a');
        expect(await store.manifest('dep_a')).to.equal(null);
        // Written within the grace period: kept (a build may be storing its artifact).
        expect(await store.collectGarbage()).to.equal(0);
        const old = new Date(Date.now() - 3_600_000);
        for (const f of objects()) utimesSync(f, old, old);
        expect(await store.collectGarbage()).to.equal(1);
        const left = objects();
        expect(left).to.have.length(2);
        expect(left.some((f) => f.endsWith(a.manifest.files['/a.txt']!.hash))).to.equal(false);
        expect(left.some((f) => f.endsWith(a.manifest.files['/index.html']!.hash))).to.equal(true);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    });
  });
});
