// Test tier: unit
import bcrypt from 'bcryptjs';
import { expect } from 'chai';
import { PasswordHasher } from '../../server/access/passwords.js';

describe('PasswordHasher (bcrypt on worker threads)', () => {
  let hasher: PasswordHasher;
  before(() => {
    hasher = new PasswordHasher({ cost: 4, threads: 2, idleTimeoutMs: 1_000 });
  });
  after(() => hasher.close());

  it('makes bcrypt hashes of the configured cost that bcryptjs verifies, and verifies its own', async () => {
    const [a, b] = await Promise.all([hasher.hash('correct horse'), hasher.hash('correct horse')]);
    expect(a).to.match(/^\$2b\$04\$/);
    expect(a, 'salted').to.not.equal(b);
    expect(await bcrypt.compare('correct horse', a)).to.equal(true);
    expect(await hasher.compare('correct horse', b)).to.equal(true);
    expect(await hasher.compare('correct horsE', b)).to.equal(false);
  });

  it('verifies hashes made elsewhere (bcryptjs on the main thread)', async () => {
    const h = await bcrypt.hash('pässwörd', 4);
    expect(await hasher.compare('pässwörd', h)).to.equal(true);
  });

  it('answers false against the dummy hash of unknown emails', async () => {
    expect(await hasher.compareWithDummy('not-a-real-password-0123456789x')).to.equal(false);
    expect(await hasher.compareWithDummy('anything')).to.equal(false);
  });
});
