// Test tier: process
import { expect } from 'chai';
import { sha256Hex } from '../../server/lib/crypto.js';
import { createOrg, createUser, type TestUser } from '../support/factories.js';
import { http } from '../support/http.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { expectFailure, expectOk, json } from './support/cli-expect.js';
import { Terminal } from './support/run-cli.js';

/**
 * docs/cli.md, "organization": `cloud organization scim-token` as a subprocess against a live server: the token is
 * shown once with the base URL, works on /scim/v2, and a second one replaces it (docs/sso.md, "SCIM provisioning").
 */
describe('cloud CLI: organization scim-token (a subprocess against a live server)', function () {
  this.timeout(180_000);
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(async () => {
    await s?.close();
  });

  async function signIn(user: TestUser): Promise<Terminal> {
    const term = new Terminal(s.baseUrl);
    expectOk(
      await term.run(['login', '--email', user.email, '--password-stdin'], { input: `${user.password}\n` }),
    );
    return term;
  }
  const scimUsers = (token: string) => http(s.baseUrl, 'GET', '/scim/v2/Users', { token });

  it('shows the base URL and a token that works, and a new token replaces it', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const term = await signIn(owner);
    const first = json(expectOk(await term.run(['organization', 'scim-token', '--json'])));
    expect(first.scim.base_url).to.equal(`${s.deps.config.publicBaseUrl}/scim/v2`);
    expect((await scimUsers(first.scim.token)).status).to.equal(200);
    const rows = await s.deps.db.orm.em
      .fork()
      .execute<{ token_hash: string }[]>('select token_hash from scim_tokens where organization_id = ?', [
        owner.organizationId,
      ]);
    expect(rows).to.deep.equal([{ token_hash: sha256Hex(first.scim.token) }]);

    const text = expectOk(await term.run(['organization', 'scim-token']));
    const token = /token:\s+(scim_\S+)/.exec(text.stdout)?.[1];
    expect(token, text.stdout).to.be.a('string');
    expect(text.stdout).to.include('/scim/v2').and.include('not shown again');
    expect((await scimUsers(first.scim.token)).status).to.equal(401);
    expect((await scimUsers(token!)).status).to.equal(200);
  });

  it('is refused to an admin (exit 3) and below Enterprise (exit 5)', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    expectFailure(await (await signIn(admin)).run(['organization', 'scim-token']), 3, /^error: /);
    const pro = await createOrg(s.deps, { plan: 'pro' });
    expectFailure(await (await signIn(pro)).run(['organization', 'scim-token']), 5, /Enterprise/);
  });
});
