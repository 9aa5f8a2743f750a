// Test tier: server
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { User } from '../../server/access/user.entity.js';
import { Event } from '../../server/events/event.entity.js';
import { looseEvent } from '../support/events.js';
import { recordEvent, recordEventForAllOrganizations } from '../../server/events/record-event.js';
import { startServices, stopServices } from '../../server/services.js';
import { testConfig, usingPostgres } from '../support/env.js';
import { createOrg } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, startTestServer, type TestServer } from '../support/server.js';
import { startReceiver, verifyWithThirdPartyLibraries, type Receiver } from '../modules/webhooks/receiver.js';
import { createWebhook } from '../modules/webhooks/webhook-helpers.js';

describe('events: transactional outbox', () => {
  let s: TestServer;
  let rx: Receiver;
  before(async () => {
    s = await sharedServer();
  });
  beforeEach(async () => {
    rx = await startReceiver();
  });
  afterEach(async () => {
    await rx.close();
  });

  it('delivers nothing for a rolled-back change', async () => {
    const owner = await createOrg(s.deps);
    await createWebhook(s, owner, rx.url, ['user.updated']);
    const failed = await s.deps.db.orm.em
      .fork()
      .transactional(async (em) => {
        const user = await em.findOneOrFail(User, { id: owner.id });
        user.name = 'Never saved';
        recordEvent(
          em,
          looseEvent('user.updated'),
          { id: user.id, marker: 'rolled-back' },
          owner.organizationId,
          new Date(),
        );
        await em.flush();
        throw new Error('the change fails after its event was written');
      })
      .then(
        () => false,
        () => true,
      );
    expect(failed).to.equal(true);
    // A later committed event is relayed; the outbox is relayed in order, so the first would have come before it.
    await s.deps.db.orm.em.fork().transactional(async (em) => {
      recordEvent(
        em,
        looseEvent('user.updated'),
        { id: owner.id, marker: 'committed' },
        owner.organizationId,
        new Date(),
      );
    });
    await rx.waitFor((r) => r.some((x) => x.body.data.object.marker === 'committed'));
    expect(rx.requests.map((x) => x.body.data.object.marker)).to.deep.equal(['committed']);
    const em = s.deps.db.orm.em.fork();
    expect(await em.count(Event, { organizationId: owner.organizationId, type: 'user.updated' })).to.equal(1);
    expect((await em.findOneOrFail(User, { id: owner.id })).name).not.to.equal('Never saved');
  });

  it('fans a platform event out to every organization subscribed to it', async () => {
    const a = await createOrg(s.deps);
    const b = await createOrg(s.deps);
    const c = await createOrg(s.deps);
    const other = await startReceiver();
    try {
      const whA = await createWebhook(s, a, rx.url, ['vpn.server.created']);
      const whB = await createWebhook(s, b, rx.url, ['vpn.server.created', 'vpn.server.deleted']);
      await createWebhook(s, c, other.url, ['vpn.connected']);
      let eventId = '';
      await s.deps.db.orm.em.fork().transactional(async (em) => {
        eventId = recordEventForAllOrganizations(
          em,
          looseEvent('vpn.server.created', 'platform'),
          {
            id: 'srv_test',
            city: 'Oslo',
          },
          new Date(),
        ).id;
      });
      const reqs = await rx.waitFor((r) => r.filter((x) => x.body.id === eventId).length >= 2);
      const mine = reqs.filter((x) => x.body.id === eventId);
      expect(mine.map((x) => x.body.organization_id).sort()).to.deep.equal(
        [a.organizationId, b.organizationId].sort(),
      );
      for (const r of mine) {
        expect(r.body).to.include({ type: 'vpn.server.created' });
        expect(r.body.data).to.deep.equal({ object: { id: 'srv_test', city: 'Oslo' } });
        const secret = r.body.organization_id === a.organizationId ? whA.secret : whB.secret;
        expect(await verifyWithThirdPartyLibraries(secret, r)).to.equal(true);
      }
      expect(other.requests).to.have.length(0);
    } finally {
      await other.close();
    }
  });

  it('delivers after restart an event committed by a process killed right after the commit', async function () {
    this.timeout(120_000);
    const dir = usingPostgres ? undefined : mkdtempSync(join(tmpdir(), 'outbox-crash-'));
    const config = testConfig();
    try {
      // 1. Data: an organization with a webhook.
      const server1 = await startTestServer({
        config,
        pgliteDataDir: dir && join(dir, 'db'),
        startJobs: false,
      });
      const owner = await createOrg(server1.deps);
      const wh = await createWebhook(server1, owner, rx.url, ['user.updated']);
      await server1.close();

      // 2. Another process commits a change and its event, and dies at once.
      const child = spawn(process.execPath, ['--import', 'tsx', 'tests/events/fixtures/commit-then-die.ts'], {
        env: {
          ...process.env,
          CRASH_PGLITE_DIR: dir && join(dir, 'db'),
          CRASH_USER_ID: owner.id,
          CRASH_ORG_ID: owner.organizationId,
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      const signal = await new Promise<NodeJS.Signals | null>((resolve) =>
        child.on('exit', (_code, sig) => resolve(sig)),
      );
      expect(signal).to.equal('SIGKILL');
      const eventId = out.trim();
      expect(eventId).to.match(/^evt_/);

      // 3. A server starts on the same database and delivers it.
      const deps = await startServices(config, { pgliteDataDir: dir && join(dir, 'db') });
      try {
        const [req] = await rx.waitFor((r) => r.some((x) => x.body.id === eventId), 30_000);
        expect(req!.body).to.include({ type: 'user.updated', organization_id: owner.organizationId });
        expect(req!.body.data.object).to.deep.equal({ id: owner.id, name: 'Renamed before the crash' });
        expect(await verifyWithThirdPartyLibraries(wh.secret, req!)).to.equal(true);
      } finally {
        await stopServices(deps);
      }
    } finally {
      if (dir) rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('events: two server processes on one PostgreSQL database', () => {
  let servers: TestServer[] = [];
  let rx: Receiver;
  before(async function () {
    if (!usingPostgres) this.skip();
    this.timeout(120_000);
    servers = [await startTestServer(), await startTestServer()];
    rx = await startReceiver();
  });
  after(async () => {
    await rx?.close();
    for (const srv of servers) await srv.close();
  });

  it('never makes the same attempt twice, and relays each event once', async function () {
    this.timeout(120_000);
    const [one, two] = servers as [TestServer, TestServer];
    const owner = await createOrg(one.deps);
    const wh = await createWebhook(one, owner, rx.url, ['user.updated']);
    // Every delivery fails its first attempt and succeeds on the second: retries contend too.
    const firstSeen = new Set<string>();
    rx.respond((r) => {
      const id = String(r.headers['x-vpn-delivery']);
      if (firstSeen.has(id)) return { status: 200 };
      firstSeen.add(id);
      return { status: 500 };
    });
    const EVENTS = 300;
    // Both processes commit events, in transactions of various sizes.
    const emitFrom = async (srv: TestServer, from: number, to: number) => {
      for (let i = from; i < to; i += 7) {
        await srv.deps.db.orm.em.fork().transactional(async (em) => {
          for (let j = i; j < Math.min(i + 7, to); j++) {
            recordEvent(em, looseEvent('user.updated'), { id: `n${j}` }, owner.organizationId, new Date());
          }
        });
      }
    };
    await Promise.all([emitFrom(one, 0, EVENTS / 2), emitFrom(two, EVENTS / 2, EVENTS)]);
    await rx.waitFor((r) => r.length >= EVENTS * 2, 90_000);
    // Let any duplicate (there must be none) arrive before counting.
    await new Promise((r) => setTimeout(r, 1500));

    const attempts = rx.requests.map(
      (r) => `${r.headers['x-vpn-delivery']}#${r.headers['x-vpn-delivery-attempt']}`,
    );
    expect(new Set(attempts).size).to.equal(attempts.length);
    expect(attempts).to.have.length(EVENTS * 2);
    const objects = new Set(rx.requests.map((r) => r.body.data.object.id));
    expect(objects.size).to.equal(EVENTS);
    const deliveryIds = new Set(rx.requests.map((r) => String(r.headers['x-vpn-delivery'])));
    expect(deliveryIds.size).to.equal(EVENTS);

    // Both processes took part (the shared server of the run, if started, may have too).
    const [w1, w2] = servers.map((srv) => srv.deps.modules.webhooks.deliveryWorker);
    expect(w1!.attemptsMade, 'attempts by server one').to.be.greaterThan(0);
    expect(w2!.attemptsMade, 'attempts by server two').to.be.greaterThan(0);

    const detail = await http(one.baseUrl, 'GET', `/v1/webhooks/${wh.id}`, { token: owner.token });
    expect(detail.body.webhook.delivery_stats).to.include({
      total_deliveries: EVENTS,
      successful_deliveries: EVENTS,
      failed_deliveries: 0,
    });
  });
});
