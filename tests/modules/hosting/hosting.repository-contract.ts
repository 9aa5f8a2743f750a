import { expect } from 'chai';
import type { AppDeps } from '../../../server/kit/deps.js';
import { newId } from '../../../server/lib/ids.js';
import type { PageRequest } from '../../../server/lib/pagination.js';
import type { DeploymentStatus, Framework } from '../../../server/modules/hosting/hosting.constants.js';
import type {
  HostingRepository,
  SiteListFilter,
} from '../../../server/modules/hosting/hosting.repository.js';
import type { ContractWorld } from '../../support/repository-contract.js';
import { actorOf } from '../../support/unit.js';

/** What the hosting contract runs against: a repository, the rows it refers to, the deps its counting query takes. */
export interface HostingContractSubject {
  repo: HostingRepository;
  world: ContractWorld;
  deps: AppDeps;
}

const T0 = Date.parse('2026-11-01T00:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);

/**
 * The behaviour of a {@link HostingRepository} the hosting services rely on (docs/hosting.md, "Inside the module"),
 * run against the MikroORM repository on the test database and the in-memory one of the unit tests
 * (tests/modules/hosting/hosting.repository-contract.test.ts). Slugs are unique over every organization, so each site
 * gets a random one.
 */
export function describeHostingRepositoryContract(
  label: string,
  make: () => Promise<HostingContractSubject>,
): void {
  describe(`HostingRepository contract: ${label}`, () => {
    let s: HostingContractSubject;
    beforeEach(async () => {
      s = await make();
    });

    async function site(
      organizationId: string,
      userId: string,
      seconds: number,
      opts: { framework?: Framework; domain?: string } = {},
    ) {
      const id = newId('site');
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        s.repo.createSite(tx, {
          id,
          organizationId,
          userId,
          now: at(seconds),
          name: `site ${seconds}`,
          slug: id.replace('_', '-').toLowerCase(),
          domain: opts.domain ?? null,
          domainVerificationToken: opts.domain ? 'token' : null,
          gitRepo: 'https://github.com/example/app',
          branch: 'main',
          framework: opts.framework ?? 'react',
          buildCommand: 'npm run build',
          outputDirectory: 'dist',
          nodeVersion: '22',
          environmentVariables: 'sealed-environment',
        });
      });
      return { id, slug: id.replace('_', '-').toLowerCase() };
    }

    async function deployment(siteId: string, seconds: number, status: DeploymentStatus = 'queued') {
      const id = newId('dep');
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        const owner = await s.repo.lockSite(tx, siteId);
        const d = s.repo.createDeployment(tx, {
          id,
          site: owner!,
          now: at(seconds),
          branch: 'main',
          commit: 'a'.repeat(40),
          commitPinned: false,
          builder: 'simulated',
          message: null,
        });
        d.status = status;
      });
      return id;
    }

    it('finds a site for its owner and the admins, never for another member nor another organization', async () => {
      const a = await s.world.organization();
      const member = await s.world.user(a.organizationId, 'member');
      const b = await s.world.organization();
      const { id } = await site(a.organizationId, member, 1);
      const em = s.repo.fork();

      const own = await s.repo.findSite(em, actorOf(a.organizationId, member, 'member'), id);
      expect(own).to.include({
        id,
        name: 'site 1',
        status: 'active',
        buildTicket: 0,
        liveDeploymentId: null,
      });
      expect(own!.environmentVariables).to.equal(undefined);
      const admin = await s.world.user(a.organizationId, 'admin');
      const full = await s.repo.findSite(s.repo.fork(), actorOf(a.organizationId, admin, 'admin'), id, {
        withEnvironment: true,
      });
      expect(full!.environmentVariables).to.equal('sealed-environment');
      expect((await s.repo.siteForBuild(s.repo.fork(), id))!.environmentVariables).to.equal(
        'sealed-environment',
      );
      const other = await s.world.user(a.organizationId, 'member');
      expect(await s.repo.findSite(em, actorOf(a.organizationId, other, 'member'), id)).to.equal(null);
      expect(await s.repo.findSite(em, actorOf(b.organizationId, b.userId, 'owner'), id)).to.equal(null);
    });

    it('lists sites newest first with the filters and the total, by page and cursor; counts them for the plan', async () => {
      const a = await s.world.organization();
      const other = await s.world.user(a.organizationId);
      const b = await s.world.organization();
      const s1 = await site(a.organizationId, a.userId, 1);
      const s2 = await site(a.organizationId, a.userId, 2, { framework: 'vue' });
      const s3 = await site(a.organizationId, other, 3);
      await site(b.organizationId, b.userId, 4);
      const list = (filter: Partial<SiteListFilter>, page: PageRequest = { page: 1, limit: 10 }) =>
        s.repo.listSites(s.repo.fork(), { organizationId: a.organizationId, ...filter }, page);
      const ids = (p: { items: { id: string }[] }) => p.items.map((x) => x.id);

      const all = await list({});
      expect(ids(all)).to.deep.equal([s3.id, s2.id, s1.id]);
      expect(all).to.include({ total: 3, hasMore: false });
      expect(all.items[0]).to.deep.include({ slug: s3.slug, user: { id: other }, framework: 'react' });
      expect(all.items[0]!.createdAt.getTime()).to.equal(at(3).getTime());
      expect(ids(await list({ userId: a.userId }))).to.deep.equal([s2.id, s1.id]);
      expect(ids(await list({ framework: 'vue' }))).to.deep.equal([s2.id]);
      expect(await list({ none: true })).to.deep.equal({ items: [], total: 0, hasMore: false });
      expect(ids(await list({}, { page: 2, limit: 2 }))).to.deep.equal([s1.id]);
      expect(ids(await list({}, { page: 1, limit: 1, startingAfter: s3.id }))).to.deep.equal([s2.id]);

      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect(await s.repo.lockPlan(tx, a.organizationId)).to.deep.equal({
          plan: 'starter',
          status: 'active',
        });
        expect(await s.repo.lockedSiteCount(tx, s.deps, a.organizationId)).to.equal(3);
        expect(await s.repo.lockedSiteCount(tx, s.deps, b.organizationId)).to.equal(1);
      });
    });

    it('removes a site with its deployments and log lines; the count goes down', async () => {
      const a = await s.world.organization();
      const gone = await site(a.organizationId, a.userId, 1);
      const kept = await site(a.organizationId, a.userId, 2);
      const d1 = await deployment(gone.id, 3);
      const d2 = await deployment(kept.id, 4);
      await s.repo.transaction(s.repo.fork(), (tx) =>
        s.repo.appendLogLines(tx, d1, 0, [{ stream: 'stdout', message: 'x' }], at(5)),
      );

      await s.repo.transaction(s.repo.fork(), async (tx) =>
        s.repo.removeSite(tx, (await s.repo.lockSite(tx, gone.id))!),
      );
      const em = s.repo.fork();
      expect(await s.repo.findDeployment(em, gone.id, d1)).to.equal(null);
      expect([...(await s.repo.existingDeployments(em, [d1, d2]))]).to.deep.equal([d2]);
      expect(await s.repo.deploymentIds(em, gone.id)).to.deep.equal([]);
      expect(await s.repo.readLogLines(em, d1, 0, 10)).to.deep.equal([]);
      expect(await s.repo.deploymentStatus(d1)).to.equal(null);
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect(await s.repo.lockSite(tx, gone.id)).to.equal(null);
        expect(await s.repo.lockedSiteCount(tx, s.deps, a.organizationId)).to.equal(1);
      });
    });

    it('holds slugs for everyone and a domain once verified; previews by deployment id', async () => {
      const a = await s.world.organization();
      const b = await s.world.organization();
      const domain = `${newId('site').slice(5).toLowerCase()}.example.com`;
      const mine = await site(a.organizationId, a.userId, 1, { domain });
      const theirs = await site(b.organizationId, b.userId, 2);
      const dep = await deployment(mine.id, 3, 'success');
      const em = s.repo.fork();

      expect(
        [...(await s.repo.slugsInUse(em, [mine.slug, theirs.slug, 'free-slug-x']))].sort(),
      ).to.deep.equal([mine.slug, theirs.slug].sort());
      expect(await s.repo.domainTaken(em, domain)).to.equal(false);
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        const x = await s.repo.lockSite(tx, mine.id);
        x!.domainVerifiedAt = at(4);
        x!.liveDeploymentId = dep;
      });
      expect(await s.repo.domainTaken(s.repo.fork(), domain)).to.equal(true);
      expect(await s.repo.domainTaken(s.repo.fork(), domain, mine.id)).to.equal(false);
      const shortId = dep.slice(4, 10);
      expect(await s.repo.previewInUse(em, mine.slug, shortId)).to.equal(true);
      expect(await s.repo.previewInUse(em, theirs.slug, shortId)).to.equal(false);
      expect(await s.repo.liveRoute('slug', mine.slug)).to.deep.equal({ siteId: mine.id, deploymentId: dep });
      expect(await s.repo.liveRoute('domain', domain)).to.deep.equal({ siteId: mine.id, deploymentId: dep });
      expect(await s.repo.liveRoute('slug', theirs.slug)).to.equal(null);
      expect(await s.repo.previewRoute(mine.slug, shortId)).to.deep.equal({
        siteId: mine.id,
        deploymentId: dep,
      });
      expect(await s.repo.previewRoute(theirs.slug, shortId)).to.equal(null);
    });

    it("reads a site's deployments by status (oldest first, or a newest-first page) and the builders' share", async () => {
      const a = await s.world.organization();
      const b = await s.world.organization();
      const x = await site(a.organizationId, a.userId, 0);
      const y = await site(b.organizationId, b.userId, 0);
      const d1 = await deployment(x.id, 1, 'success');
      const d2 = await deployment(x.id, 2, 'building');
      const d3 = await deployment(x.id, 3);
      await deployment(y.id, 4);
      const em = s.repo.fork();

      const found = await s.repo.findDeployment(em, x.id, d3);
      expect(found).to.include({
        id: d3,
        status: 'queued',
        gitRepo: 'https://github.com/example/app',
        logSeq: 0,
      });
      expect(await s.repo.findDeployment(em, y.id, d3)).to.equal(null);
      const unfinished = await s.repo.deploymentsIn(em, x.id, ['queued', 'building']);
      expect(unfinished.map((d) => d.id)).to.deep.equal([d2, d3]);
      expect(await s.repo.countDeployments(em, x.id, ['queued', 'building', 'success'])).to.equal(3);
      const page = await s.repo.listDeployments(em, x.id, undefined, { page: 1, limit: 2 });
      expect(page.items.map((d) => d.id)).to.deep.equal([d3, d2]);
      expect(page).to.include({ total: 3, hasMore: true });
      expect(
        (await s.repo.listDeployments(em, x.id, 'success', { page: 1, limit: 5 })).items.map((d) => d.id),
      ).to.deep.equal([d1]);
      expect(await s.repo.deploymentStatus(d2)).to.equal('building');
      expect(await s.repo.sitesWithUnfinishedBuilds()).to.include.members([x.id, y.id]);
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        // b has one queued and none building: a's builds leave it room.
        expect(await s.repo.buildShare(tx, a.organizationId)).to.deep.equal({
          building: 1,
          othersWaiting: true,
        });
        expect((await s.repo.buildShare(tx, b.organizationId)).building).to.equal(0);
      });
    });

    it('appends build log lines in sequence and reads them by range', async () => {
      const a = await s.world.organization();
      const x = await site(a.organizationId, a.userId, 0);
      const d = await deployment(x.id, 1);
      const appended = await s.repo.transaction(s.repo.fork(), (tx) =>
        s.repo.appendLogLines(
          tx,
          d,
          0,
          [
            { stream: 'stdout', message: 'one' },
            { stream: 'stderr', message: 'two' },
            { stream: 'stdout', message: 'three' },
          ],
          at(2),
        ),
      );
      expect(appended.map((l) => l.seq)).to.deep.equal([1, 2, 3]);
      expect(
        await s.repo.transaction(s.repo.fork(), (tx) => s.repo.appendLogLines(tx, d, 3, [], at(3))),
      ).to.deep.equal([]);
      const em = s.repo.fork();
      expect(await s.repo.readLogLines(em, d, 0, 10)).to.deep.equal(appended);
      expect((await s.repo.readLogLines(em, d, 1, 1)).map((l) => l.message)).to.deep.equal(['two']);
      expect((await s.repo.readLogLines(em, d, 0, 10, 2)).map((l) => l.seq)).to.deep.equal([1, 2]);
      expect(appended[1]).to.deep.equal({
        seq: 2,
        timestamp: at(2).toISOString(),
        stream: 'stderr',
        message: 'two',
      });
    });
  });
}
