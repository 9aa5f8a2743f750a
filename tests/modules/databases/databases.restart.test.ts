// Test tier: server
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { testConfig, usingPostgres } from '../../support/env.js';
import { createOrg, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';
import { eventsOf, scratchPostgres, storedBackups, storedDatabase } from './databases-helpers.js';

/**
 * Every change in flight when the server stops is finished by the next start, on the same database (a PGlite
 * directory, or a PostgreSQL database of its own): nothing stays `creating`, `resizing`, `pending` or `deleting`
 * past its time, and nothing is done twice.
 */
describe(`Databases across a restart (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(180_000);
  let pgliteDir: string | undefined;
  let scratch: { url: string; drop: () => Promise<void> } | undefined;

  before(async () => {
    if (usingPostgres) scratch = await scratchPostgres('databases_restart');
    else pgliteDir = join(mkdtempSync(join(tmpdir(), 'databases-restart-')), 'pglite');
  });
  after(async () => {
    if (pgliteDir) rmSync(join(pgliteDir, '..'), { recursive: true, force: true });
    await scratch?.drop();
  });

  it('finishes provisioning, a resize, a backup and a scheduled deletion after the next start', async () => {
    const config = testConfig({
      PROVISIONING_DELAY_MS: '8000',
      DATABASE_DELETION_GRACE: '12s',
      DATABASE_URL: scratch?.url,
    });
    const first: TestServer = await startTestServer({ config, pgliteDataDir: pgliteDir });
    let owner!: TestUser;
    let ids!: { resized: string; deleted: string; backedUp: string; created: string };
    let finalBackup!: string;
    let manualBackup!: string;
    try {
      owner = await createOrg(first.deps, { plan: 'pro' });
      const token = owner.token;
      const create = async (name: string) => {
        const res = await http(first.baseUrl, 'POST', '/v1/databases', {
          token,
          body: { name, engine: 'postgresql', backup_enabled: false },
        });
        expect(res.status, res.text).to.equal(201);
        return res.body.database.id as string;
      };
      const three = [await create('resized'), await create('deleted'), await create('backed-up')];
      await waitFor(
        'the three databases to be running',
        async () => {
          const res = await http(first.baseUrl, 'GET', '/v1/databases?status=running', { token });
          return res.body.total === 3 ? true : undefined;
        },
        { timeoutMs: 30_000 },
      );
      const [resized, deleted, backedUp] = three as [string, string, string];
      const put = await http(first.baseUrl, 'PUT', `/v1/databases/${resized}`, {
        token,
        body: { size: 'large' },
      });
      expect(put.body.database.status).to.equal('resizing');
      const del = await http(first.baseUrl, 'DELETE', `/v1/databases/${deleted}`, { token });
      expect(del.status).to.equal(202);
      finalBackup = del.body.final_backup;
      const b = await http(first.baseUrl, 'POST', `/v1/databases/${backedUp}/backups`, { token, body: {} });
      expect(b.status).to.equal(202);
      manualBackup = b.body.backup.id;
      const created = await create('created');
      ids = { resized, deleted, backedUp, created };
    } finally {
      await first.close();
    }
    const stoppedAt = Date.now();

    const second = await startTestServer({ config, pgliteDataDir: pgliteDir });
    try {
      const token = owner.token;
      const get = (id: string) => http(second.baseUrl, 'GET', `/v1/databases/${id}`, { token });
      const created = await waitFor(
        'the created database to be running',
        async () => {
          const res = await get(ids.created);
          return res.body.database.status === 'running' ? res.body.database : undefined;
        },
        { timeoutMs: 30_000 },
      );
      expect(Date.parse(created.updated_at)).to.be.at.least(stoppedAt);
      expect(Date.parse(created.updated_at) - Date.parse(created.created_at)).to.be.at.least(8000);

      const resized = await waitFor(
        'the resized database to be running',
        async () => {
          const res = await get(ids.resized);
          return res.body.database.status === 'running' ? res.body.database : undefined;
        },
        { timeoutMs: 30_000 },
      );
      expect(resized).to.include({ size: 'large', storage: '500 GB' });

      const backups = await waitFor(
        'the backup to complete',
        async () => {
          const res = await http(second.baseUrl, 'GET', `/v1/databases/${ids.backedUp}/backups`, { token });
          return res.body.backups?.[0]?.status === 'completed' ? res.body.backups : undefined;
        },
        { timeoutMs: 30_000 },
      );
      expect(backups.map((x: any) => x.id)).to.deep.equal([manualBackup]);
      expect(Date.parse(backups[0].completed_at)).to.be.at.least(stoppedAt);

      await waitFor(
        'the deleted database to be gone',
        async () => ((await get(ids.deleted)).status === 404 ? true : undefined),
        { timeoutMs: 30_000 },
      );
      const removed = await storedDatabase(second.deps, ids.deleted);
      expect(removed!.removedAt!.getTime()).to.be.at.least(stoppedAt);
      const kept = await storedBackups(second.deps, ids.deleted);
      expect(kept.map((x) => [x.id, x.type, x.status])).to.deep.equal([[finalBackup, 'final', 'completed']]);

      // Each change happened once.
      const completed = await eventsOf(second.deps, owner.organizationId, 'database.backup.completed');
      expect(completed.map((e) => (e.data.object as { id: string }).id).sort()).to.deep.equal(
        [finalBackup, manualBackup].sort(),
      );
      expect(await eventsOf(second.deps, owner.organizationId, 'database.deleted')).to.have.length(1);
    } finally {
      await second.close();
    }
  });
});
