// Test tier: server
import { expect } from 'chai';
import type { EventSink, StreamEvent } from '../../../server/lib/event-stream.js';
import { followLogs } from '../../../server/modules/hosting/build-logs.js';
import { HostingUsageRecord } from '../../../server/modules/hosting/hosting-usage-record.entity.js';
import { domainProblem } from '../../../server/modules/hosting/hosting.schema.js';
import {
  humanBytes,
  siteMetrics,
  trafficBetween,
} from '../../../server/modules/hosting/hosting.simulation.js';
import { hostingUsageReporter } from '../../../server/modules/hosting/hosting.usage.js';
import { slugify } from '../../../server/modules/hosting/sites.service.js';
import { SimulatedHostingDriver } from '../../../server/modules/hosting/simulated-hosting.driver.js';
import { createOrg } from '../../support/factories.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';
import { newDeployment, newSite, waitForDeployment } from './hosting-helpers.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('Hosting: rules and simulation', () => {
  describe('site addresses', () => {
    it('slugify: lower-case letters and digits joined by single hyphens, at most 40, `site` when empty', () => {
      expect(slugify('My Shop!')).to.equal('my-shop');
      expect(slugify('  Café — Über  ')).to.equal('cafe-uber');
      expect(slugify('a__b..c')).to.equal('a-b-c');
      expect(slugify('日本語')).to.equal('site');
      expect(slugify('---')).to.equal('site');
      const long = slugify(`${'abc-'.repeat(20)}end`);
      expect(long.length).to.be.at.most(40);
      expect(long).to.not.match(/-$/);
    });

    it('domainProblem: lower-case host names of two labels or more, at most 253 characters', () => {
      for (const ok of ['example.com', 'www.shop.example.co.uk', 'a-b.c1', `${'a'.repeat(63)}.com`]) {
        expect(domainProblem(ok), ok).to.equal(undefined);
      }
      for (const bad of [
        'example',
        'Example.com',
        'exa mple.com',
        '-a.com',
        'a-.com',
        'a..com',
        '.a.com',
        'a.com.',
        '1.2.3.4',
        `${'a'.repeat(64)}.com`,
        `${'abcdefghi.'.repeat(26)}com`,
        'ex_ample.com',
        'https://example.com',
      ]) {
        expect(domainProblem(bad), bad).to.be.a('string');
      }
    });
  });

  describe('traffic simulation', () => {
    const live = new Date('2026-11-01T00:00:00.000Z');
    const t = (h: number) => new Date(live.getTime() + h * HOUR);

    it('is whole and additive over adjacent windows, zero before the site went live and after it was deleted', () => {
      const id = 'site_additive000000000000';
      const ab = trafficBetween(id, { from: t(1), to: t(5) }, { liveSince: live });
      const bc = trafficBetween(id, { from: t(5), to: t(30) }, { liveSince: live });
      const ac = trafficBetween(id, { from: t(1), to: t(30) }, { liveSince: live });
      expect(ab.requests + bc.requests).to.equal(ac.requests);
      expect(ab.bytes + bc.bytes).to.equal(ac.bytes);
      expect(Number.isInteger(ac.requests) && ac.requests > 0).to.equal(true);
      expect(trafficBetween(id, { from: t(-10), to: t(0) }, { liveSince: live })).to.deep.equal({
        requests: 0,
        bytes: 0,
      });
      expect(trafficBetween(id, { from: t(1), to: t(5) }, { liveSince: null }).requests).to.equal(0);
      const cut = trafficBetween(id, { from: t(1), to: t(30) }, { liveSince: live, until: t(5) });
      expect(cut).to.deep.equal(ab);
    });

    it('is the same on every read, differs between sites, and follows the time of day', () => {
      const a = trafficBetween('site_a0000000000000000000', { from: t(0), to: t(24) }, { liveSince: live });
      expect(
        trafficBetween('site_a0000000000000000000', { from: t(0), to: t(24) }, { liveSince: live }),
      ).to.deep.equal(a);
      const b = trafficBetween('site_b0000000000000000000', { from: t(0), to: t(24) }, { liveSince: live });
      expect(b).to.not.deep.equal(a);
      const hours = Array.from(
        { length: 24 },
        (_, h) =>
          trafficBetween('site_a0000000000000000000', { from: t(h), to: t(h + 1) }, { liveSince: live })
            .requests,
      );
      expect(Math.max(...hours)).to.be.greaterThan(1.5 * Math.min(...hours));
    });

    it('metrics: requests and bytes of the last 24 hours, the availability once live', () => {
      const id = 'site_metrics0000000000000';
      const now = t(50);
      const m = siteMetrics(id, live, now);
      const day = trafficBetween(id, { from: new Date(now.getTime() - DAY), to: now }, { liveSince: live });
      expect(m.requests_24h).to.equal(day.requests);
      expect(m.bandwidth_24h).to.equal(humanBytes(day.bytes));
      expect(m.uptime).to.match(/^(99\.9\d|100\.00)%$/);
      expect(siteMetrics(id, null, now)).to.deep.equal({
        requests_24h: 0,
        bandwidth_24h: '0 B',
        uptime: '0%',
      });
    });

    it('humanBytes: decimal units', () => {
      expect(humanBytes(0)).to.equal('0 B');
      expect(humanBytes(999)).to.equal('999 B');
      expect(humanBytes(1_500)).to.equal('1.50 KB');
      expect(humanBytes(1_240_000_000)).to.equal('1.24 GB');
    });
  });

  describe('simulated builder', () => {
    const spec = {
      deploymentId: 'dep_unit00000000000000000',
      siteId: 'site_unit0000000000000000',
      gitRepo: 'https://github.com/acme/web',
      branch: 'main',
      commit: 'a'.repeat(40),
      framework: 'nextjs' as const,
      buildCommand: 'npm run build && npm run export',
      outputDirectory: 'out',
      nodeVersion: '20' as const,
      environmentVariableNames: ['A', 'B'],
      url: 'https://web-unit0000.sites.example.com',
    };

    it('clones, installs, builds, uploads, then succeeds; the same step prints the same again', async () => {
      const driver = new SimulatedHostingDriver({ allowPrivate: false }, async () => ['140.82.112.3']);
      const states: string[] = [];
      for (let step = 0; step < driver.steps; step++) {
        const r = await driver.runStep(step, spec);
        states.push(r.state);
        expect(r.output.length).to.be.greaterThan(0);
        expect(await driver.runStep(step, spec)).to.deep.equal(r);
      }
      expect(states).to.deep.equal(['running', 'running', 'running', 'running', 'succeeded']);
    });

    it('refuses to clone from a repository host that now resolves to a private address', async () => {
      const driver = new SimulatedHostingDriver({ allowPrivate: false }, async () => ['10.0.0.8']);
      const r = await driver.runStep(0, spec);
      expect(r.state).to.equal('failed');
      expect(r.output[0]).to.include({ stream: 'stderr' });
      expect(r.output[0]!.message).to.include('private address');
    });

    it('fails at the build step when the command contains `exit 1`', async () => {
      const driver = new SimulatedHostingDriver({ allowPrivate: false }, async () => ['140.82.112.3']);
      const r = await driver.runStep(2, { ...spec, buildCommand: 'npm ci; exit 1' });
      expect(r.state).to.equal('failed');
      expect(r.output.at(-1)!.stream).to.equal('stderr');
    });
  });

  describe('with a server', () => {
    let s: TestServer;
    before(async () => {
      s = await sharedServer();
    });

    it('reports sites, build minutes and bandwidth of a period, deleted sites included', async () => {
      const owner = await createOrg(s.deps);
      const em = s.deps.db.orm.em.fork();
      const periodStart = new Date('2026-10-01T00:00:00.000Z');
      const periodEnd = new Date('2026-11-01T00:00:00.000Z');
      const now = new Date('2026-10-20T00:00:00.000Z');
      const at = (d: string) => new Date(d);

      const live = await newSite(s.baseUrl, owner.token, { name: 'live' });
      const idle = await newSite(s.baseUrl, owner.token, { name: 'never deployed' });
      await em.execute('update hosting_sites set created_at = ? where id = ?', [
        at('2026-10-10T00:00:00.000Z'),
        idle.id,
      ]);
      await em.execute('update hosting_sites set live_since = ?, created_at = ? where id = ?', [
        at('2026-09-20T00:00:00.000Z'),
        at('2026-09-01T00:00:00.000Z'),
        live.id,
      ]);
      const record = (
        resourceId: string,
        kind: 'build' | 'site',
        siteId: string,
        start: string,
        end: string,
      ) =>
        em.create(HostingUsageRecord, {
          resourceId,
          organization: owner.organizationId,
          kind,
          siteId,
          startedAt: at(start),
          endedAt: at(end),
        });
      // 90 s inside, 30 s of a build that straddles the start, a build after `now` does not count yet.
      record(`dep_u1${Date.now()}`, 'build', live.id, '2026-10-05T10:00:00.000Z', '2026-10-05T10:01:30.000Z');
      record(`dep_u2${Date.now()}`, 'build', live.id, '2026-09-30T23:59:30.000Z', '2026-10-01T00:00:30.000Z');
      record(`dep_u3${Date.now()}`, 'build', live.id, '2026-10-25T00:00:00.000Z', '2026-10-25T00:10:00.000Z');
      const gone = `site_gone${Date.now()}`;
      record(gone, 'site', gone, '2026-10-02T00:00:00.000Z', '2026-10-03T00:00:00.000Z');
      await em.flush();

      const report = await hostingUsageReporter.report(
        em,
        owner.organizationId,
        { start: periodStart, end: periodEnd },
        now,
      );
      const window = { from: periodStart, to: now };
      const bytes =
        trafficBetween(live.id, window, { liveSince: at('2026-09-20T00:00:00.000Z') }).bytes +
        trafficBetween(gone, window, {
          liveSince: at('2026-10-02T00:00:00.000Z'),
          until: at('2026-10-03T00:00:00.000Z'),
        }).bytes;
      expect(report).to.deep.equal({
        'hosting.sites': 2,
        'hosting.build_minutes': 2,
        'hosting.bandwidth_gb': Math.round((bytes / 1e9) * 1000) / 1000,
      });
      expect(s.deps.registry.usageReporters).to.include(hostingUsageReporter);
    });

    it('counts the builds of the API and keeps them after their site is deleted', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const d = await newDeployment(s.baseUrl, owner.token, site.id);
      const done = await waitForDeployment(s.baseUrl, owner.token, site.id, d.id);
      const period = { start: new Date(Date.now() - DAY), end: new Date(Date.now() + DAY) };
      const em = s.deps.db.orm.em.fork();
      const before = await hostingUsageReporter.report(em, owner.organizationId, period, new Date());
      const expected = (Date.parse(done.completed_at) - Date.parse(done.started_at)) / 60_000;
      expect(before['hosting.build_minutes']).to.equal(Math.round(expected * 100) / 100);
      expect(before['hosting.sites']).to.equal(1);
      await s.caller(owner.token).hosting.sites.delete({ id: site.id });
      const after = await hostingUsageReporter.report(em, owner.organizationId, period, new Date());
      expect(after['hosting.build_minutes']).to.equal(before['hosting.build_minutes']);
      expect(after['hosting.sites']).to.equal(0);
    });

    it('a follower fills a gap in the announced lines from the table, and writes each line once', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const d = await newDeployment(s.baseUrl, owner.token, site.id);
      await waitForDeployment(s.baseUrl, owner.token, site.id, d.id);
      const em = s.deps.db.orm.em.fork();
      const [row] = await em.execute<{ n: number }[]>(
        'select count(*)::int as n from hosting_build_logs where deployment_id = ?',
        [d.id],
      );
      const n = row!.n;
      const sent: StreamEvent[] = [];
      let closed = false;
      const sink: EventSink = {
        send: (e) => void (!closed && sent.push(e)),
        close: () => void (closed = true),
        get closed() {
          return closed;
        },
      };
      let status: 'building' | 'success' = 'building';
      const release = followLogs(s.deps, d.id, 0, async () => status, sink);
      const logs = () => sent.filter((e) => e.event === 'log').map((e) => (e.data as { seq: number }).seq);
      await waitFor(`${n} log lines`, () => logs().length === n, { timeoutMs: 2_000 });
      // Two more lines are committed, but only the second is announced (as announcements may overtake).
      const extra = await em.transactional((tx) =>
        s.deps.modules.hosting.repository.appendLogLines(
          tx,
          d.id,
          n,
          [
            { stream: 'stdout', message: 'one' },
            { stream: 'stdout', message: 'two' },
          ],
          new Date(),
        ),
      );
      s.deps.modules.hosting.logHub.publish({ deploymentId: d.id, lines: [extra[1]!] });
      await waitFor(`${n + 2} log lines`, () => logs().length === n + 2, { timeoutMs: 2_000 });
      // A repeat changes nothing; the final status ends the stream.
      status = 'success';
      s.deps.modules.hosting.logHub.publish({ deploymentId: d.id, lines: extra, status: 'success' });
      await waitFor('the stream to close', () => closed, { timeoutMs: 2_000 });
      expect(logs()).to.deep.equal(Array.from({ length: n + 2 }, (_, i) => i + 1));
      expect(sent.at(-1)).to.deep.equal({ event: 'end', data: { status: 'success' } });
      release();
      expect(s.deps.modules.hosting.logHub.listenerCount(d.id)).to.equal(0);
    });
  });
});
