// Test tier: server
import pg from 'pg';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { Config } from '../../../server/config.js';
import { testConfig, usingPostgres } from '../../support/env.js';
import { createOrg } from '../../support/factories.js';
import { startTestServer } from '../../support/server.js';
import {
  eventsOf,
  getDeployment,
  logLines,
  logsOf,
  newDeployment,
  newSite,
  openSse,
  waitForDeployment,
} from './hosting-helpers.js';
import { waitFor } from '../../support/wait.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';

/** Deployments of the database still `queued` or `building`. */
async function unfinished(query: (sql: string) => Promise<unknown[]>): Promise<unknown[]> {
  return query(`select id, status from hosting_deployments where status in ('queued', 'building')`);
}

describe('Hosting builds across a restart', function () {
  this.timeout(180_000);
  let pgliteDir: string | undefined;
  let databaseUrl: string | undefined;
  let scratch: ScratchDatabase | undefined;

  beforeEach(async () => {
    if (usingPostgres) {
      scratch = await ownPostgresDatabase('hosting_restart');
      databaseUrl = scratch?.url;
    } else {
      pgliteDir = join(mkdtempSync(join(tmpdir(), 'hosting-restart-')), 'pglite');
    }
  });

  afterEach(async () => {
    if (pgliteDir) rmSync(join(pgliteDir, '..'), { recursive: true, force: true });
    await scratch?.drop();
  });

  const start = (config: Config) => startTestServer({ config, pgliteDataDir: pgliteDir });

  /** Runs SQL on the database while no server has it open (PGlite is single-process). */
  async function offline(sql: string): Promise<unknown[]> {
    if (databaseUrl) {
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      try {
        return (await client.query(sql)).rows;
      } finally {
        await client.end();
      }
    }
    const { PGlite } = await import('@electric-sql/pglite');
    const db = await PGlite.create(pgliteDir);
    try {
      return (await db.query(sql)).rows;
    } finally {
      await db.close();
    }
  }

  it('resumes a build stopped in the middle after the next start, and leaves nothing building', async () => {
    // Two seconds per phase: the stop surely comes in the middle of the build.
    const config = testConfig({ PROVISIONING_DELAY_MS: '2000', DATABASE_URL: databaseUrl });
    const first = await start(config);
    const owner = await createOrg(first.deps);
    const site = await newSite(first.baseUrl, owner.token);
    const d = await newDeployment(first.baseUrl, owner.token, site.id);
    const behind = await newDeployment(first.baseUrl, owner.token, site.id);
    const sse = await openSse(first.baseUrl, `/v1/hosting/sites/${site.id}/deployments/${d.id}/logs`, {
      token: owner.token,
    });
    await sse.waitFor((e) => e.length >= 3, 20_000);
    expect((await getDeployment(first.baseUrl, owner.token, site.id, d.id)).status).to.equal('building');
    await first.close();
    await sse.ended;
    // The stream ended with the server, without `end`: the build is not over.
    expect(sse.events.some((e) => e.event === 'end')).to.equal(false);
    expect(await unfinished(offline)).to.have.length(2);

    const second = await start(config);
    try {
      // The follower reconnects where it stopped.
      const rest = await openSse(second.baseUrl, `/v1/hosting/sites/${site.id}/deployments/${d.id}/logs`, {
        token: owner.token,
        headers: { 'last-event-id': sse.events.at(-1)!.id! },
      });
      await rest.ended;
      expect(JSON.parse(rest.events.at(-1)!.data)).to.deep.equal({ status: 'success' });
      const seqs = [...logLines(sse.events), ...logLines(rest.events)].map((l) => l.seq);
      expect(seqs).to.deep.equal(seqs.map((_, i) => i + 1));

      const done = await waitForDeployment(second.baseUrl, owner.token, site.id, d.id);
      expect(done.status).to.equal('success');
      const { logs } = await logsOf(second.baseUrl, owner.token, site.id, d.id);
      expect(logs.map((l) => l.message)).to.include(
        'The build service restarted; resuming the build where it stopped',
      );
      // Each step wrote its lines once.
      expect(logs.filter((l) => l.message.startsWith('Cloning'))).to.have.length(1);
      expect(logs.filter((l) => l.message.startsWith('Deployment ready'))).to.have.length(1);

      const next = await waitForDeployment(second.baseUrl, owner.token, site.id, behind.id);
      expect(next.status).to.equal('success');
      expect(Date.parse(next.started_at)).to.be.at.least(Date.parse(done.completed_at));
      const events = await eventsOf(second.deps, owner.organizationId, 'hosting.deployment.succeeded');
      expect(events.map((e) => (e.data.object as { id: string }).id)).to.deep.equal([d.id, behind.id]);
      const left = await second.deps.db.orm.em
        .fork()
        .execute(`select id from hosting_deployments where status in ('queued', 'building')`);
      expect(left).to.deep.equal([]);
    } finally {
      await second.close();
    }
  });

  it('resumes a build whose queued step was lost (a crash in the middle of a step)', async () => {
    const config = testConfig({ PROVISIONING_DELAY_MS: '2000', DATABASE_URL: databaseUrl });
    const first = await start(config);
    const owner = await createOrg(first.deps);
    const site = await newSite(first.baseUrl, owner.token);
    const d = await newDeployment(first.baseUrl, owner.token, site.id);
    await waitForDeployment(first.baseUrl, owner.token, site.id, d.id, ['building'], 20_000);
    await first.close();
    // As a killed process leaves it: the step it was running stays `active` in the queue, nothing else is queued.
    await offline(
      `update pgboss.job set state = 'active', started_on = now() where name = 'hosting.build' and state in ('created', 'retry')`,
    );

    const second = await start(config);
    try {
      const done = await waitForDeployment(second.baseUrl, owner.token, site.id, d.id, undefined, 30_000);
      expect(done.status).to.equal('success');
      const left = await waitFor('no deployment left queued or building', async () => {
        const rows = await second.deps.db.orm.em
          .fork()
          .execute(`select id from hosting_deployments where status in ('queued', 'building')`);
        return rows.length === 0 ? rows : undefined;
      });
      expect(left).to.deep.equal([]);
    } finally {
      await second.close();
    }
  });
});
