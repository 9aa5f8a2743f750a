// Test tier: server
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { Config } from '../../../server/config.js';
import { testConfig, usingPostgres } from '../../support/env.js';
import { createOrg } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { startTestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';
import { createConnection, eventsOf } from './vpn-helpers.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';

/** A server on a database that outlives it: a PGlite directory, or a PostgreSQL database of its own. */
const start = (config: Config, pgliteDataDir: string | undefined) =>
  startTestServer({ config, pgliteDataDir });

describe('VPN activation across a restart', function () {
  this.timeout(120_000);
  let pgliteDir: string | undefined;
  let databaseUrl: string | undefined;
  let scratch: ScratchDatabase | undefined;

  before(async () => {
    if (usingPostgres) {
      scratch = await ownPostgresDatabase('vpn_restart');
      databaseUrl = scratch?.url;
    } else {
      pgliteDir = join(mkdtempSync(join(tmpdir(), 'vpn-restart-')), 'pglite');
    }
  });

  after(async () => {
    if (pgliteDir) rmSync(join(pgliteDir, '..'), { recursive: true, force: true });
    await scratch?.drop();
  });

  it('activates a connection created just before a stop after the next start, once', async () => {
    const config = testConfig({ PROVISIONING_DELAY_MS: '4000', DATABASE_URL: databaseUrl });
    const first = await start(config, pgliteDir);
    const owner = await createOrg(first.deps);
    const created = await createConnection(first.baseUrl, owner.token);
    expect(created.status).to.equal(201);
    const id = created.body.connection.id as string;
    await first.close();
    const stoppedAt = Date.now();
    expect(stoppedAt - Date.parse(created.body.connection.created_at)).to.be.below(4000);

    const second = await start(config, pgliteDir);
    try {
      const active = await waitFor('the connection to be active', async () => {
        const res = await http(second.baseUrl, 'GET', `/v1/vpn/connections/${id}`, { token: owner.token });
        return res.body.connection?.status === 'active' ? res.body.connection : undefined;
      });
      // Activated by the second process, no sooner than the provisioning delay.
      expect(Date.parse(active.connected_at)).to.be.at.least(stoppedAt);
      expect(Date.parse(active.connected_at) - Date.parse(active.created_at)).to.be.at.least(4000);
      const events = await eventsOf(second.deps, owner.organizationId, 'vpn.connected');
      expect(events.map((e) => (e.data.object as { id: string }).id)).to.deep.equal([id]);
    } finally {
      await second.close();
    }
  });
});
