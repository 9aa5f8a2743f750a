// Test tier: server
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { startTestServer } from '../support/server.js';

const mode = (path: string) => statSync(path).mode & 0o777;

/** DATA_DIR holds the embedded database and generated secrets: the server's user only (docs/security.md). */
describe('the data directory (DATA_DIR)', function () {
  this.timeout(60_000);
  let root: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'data-dir-'));
    // A permissive umask, as on many hosts: the modes must not depend on it.
    chmodSync(root, 0o755);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('is created 0700 with the embedded database inside, and generated secrets are 0600', async () => {
    const dataDir = join(root, 'fresh');
    const s = await startTestServer({
      env: { DATA_DIR: dataDir, JWT_SECRET: undefined, TWO_FACTOR_KEY: undefined, DATABASE_URL: undefined },
      pgliteDataDir: join(dataDir, 'pglite'),
    });
    try {
      expect(mode(dataDir).toString(8)).to.equal('700');
      expect(mode(join(dataDir, 'pglite')).toString(8)).to.equal('700');
      expect(mode(join(dataDir, 'jwt-secret')).toString(8)).to.equal('600');
      expect(mode(join(dataDir, 'two-factor-key')).toString(8)).to.equal('600');
    } finally {
      await s.close();
    }
  });

  it('closes a directory and secret files left open to others by an earlier version', async () => {
    const dataDir = join(root, 'old');
    mkdirSync(dataDir, { mode: 0o755 });
    chmodSync(dataDir, 0o755);
    writeFileSync(join(dataDir, 'jwt-secret'), `${'x'.repeat(48)}\n`, { mode: 0o644 });
    chmodSync(join(dataDir, 'jwt-secret'), 0o644);
    // Its own (embedded) database: data of the run's database is under the suite's at-rest key, not a generated one.
    const s = await startTestServer({
      env: { DATA_DIR: dataDir, JWT_SECRET: undefined, TWO_FACTOR_KEY: undefined, DATABASE_URL: undefined },
    });
    try {
      expect(mode(dataDir).toString(8)).to.equal('700');
      expect(mode(join(dataDir, 'jwt-secret')).toString(8)).to.equal('600');
      expect(mode(join(dataDir, 'two-factor-key')).toString(8)).to.equal('600');
    } finally {
      await s.close();
    }
  });
});
