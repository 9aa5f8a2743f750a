// Test tier: server
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { testConfig, usingPostgres } from '../../support/env.js';
import { createOrg, createUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { startTestServer } from '../../support/server.js';
import { scratchPostgres } from '../databases/databases-helpers.js';
import { fingerprint, rowsOf, waitRemoved } from './organization-helpers.js';

describe('organization removal across a crash', function () {
  this.timeout(240_000);
  let pgliteDir: string | undefined;
  let scratch: { url: string; drop: () => Promise<void> } | undefined;

  before(async () => {
    if (usingPostgres) scratch = await scratchPostgres('org_restart');
    else pgliteDir = join(mkdtempSync(join(tmpdir(), 'org-restart-')), 'pglite');
  });
  after(async () => {
    if (pgliteDir) rmSync(join(pgliteDir, '..'), { recursive: true, force: true });
    await scratch?.drop();
  });

  it('completes after a restart a removal whose process was killed halfway; the other organization is untouched', async () => {
    const config = testConfig({ DATABASE_URL: scratch?.url });
    // 1. Two organizations with users and audit entries.
    const first = await startTestServer({ config, pgliteDataDir: pgliteDir });
    const doomed = await createOrg(first.deps, { name: 'Doomed' });
    const other = await createOrg(first.deps, { name: 'Other' });
    for (let i = 0; i < 8; i++) {
      await createUser(first.deps, doomed.organizationId);
      const r = await http(first.baseUrl, 'PUT', '/v1/organization', {
        token: doomed.token,
        body: { name: i === 7 ? 'Doomed' : `Doomed ${i}` },
      });
      expect(r.status).to.equal(200);
    }
    await createUser(first.deps, other.organizationId);
    await http(first.baseUrl, 'PUT', '/v1/organization', { token: other.token, body: { name: 'Other Ltd' } });
    await first.deps.apiUsage.flush();
    const before = await fingerprint(first.deps, other.organizationId);
    const rowsBefore = await rowsOf(first.deps, doomed.organizationId);
    await first.close();

    // 2. Another process deletes it and is killed in the middle of the removal.
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'tests/modules/organization/fixtures/delete-then-die.ts'],
      {
        env: {
          ...process.env,
          PURGE_DATABASE_URL: scratch?.url ?? '',
          PURGE_PGLITE_DIR: pgliteDir ?? '',
          PURGE_TOKEN: doomed.token,
          PURGE_NAME: 'Doomed',
          PURGE_PASSWORD: doomed.password,
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    const signal = await new Promise<NodeJS.Signals | null>((resolve) =>
      child.on('exit', (_c, sig) => resolve(sig)),
    );
    expect(signal, out).to.equal('SIGKILL');
    expect(out).to.match(/deleted org_/);
    expect(out).to.match(/killed after/);

    // 3. Halfway: some rows gone, the organization's row still there.
    const second = await startTestServer({ config, pgliteDataDir: pgliteDir });
    try {
      const halfway = await rowsOf(second.deps, doomed.organizationId);
      // Billing's rows went in the first batches; the core's (users, the organization) are still there.
      expect(rowsBefore.subscriptions).to.equal(1);
      expect(halfway.subscriptions).to.equal(undefined);
      expect(halfway.users).to.equal(rowsBefore.users);
      expect(halfway.organizations).to.equal(1);
      // The tokens stay refused.
      expect(
        (await http(second.baseUrl, 'GET', '/v1/organization', { token: doomed.token })).status,
      ).to.equal(401);
      // 4. The restarted process finishes the removal.
      await waitRemoved(second.deps, doomed.organizationId);
      expect(await rowsOf(second.deps, doomed.organizationId)).to.deep.equal({});
      expect(await fingerprint(second.deps, other.organizationId)).to.deep.equal(before);
    } finally {
      await second.close();
    }
  });
});
