// Test tier: process
import { expect } from 'chai';
import { createOrg, createUser, type TestUser } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { expectFailure, expectOk, json } from './support/cli-expect.js';
import { Terminal } from './support/run-cli.js';

/** `cloud organization security show|set` (docs/cli.md, "organization") against a live server. */
describe('cloud CLI: organization security (a subprocess against a live server)', function () {
  // Each run starts a Node process that compiles the CLI's source.
  this.timeout(180_000);
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  async function signIn(user: TestUser): Promise<Terminal> {
    const term = new Terminal(s.baseUrl);
    expectOk(
      await term.run(['login', '--email', user.email, '--password-stdin'], { input: `${user.password}\n` }),
    );
    return term;
  }

  it('shows and sets the policy; what is left out stays; a list without the caller’s address is refused', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const term = await signIn(owner);

    const shown = expectOk(await term.run(['organization', 'security', 'show']));
    expect(shown.stdout).to.match(/two-factor required:\s+no/);
    expect(shown.stdout).to.match(/allowed addresses:\s+any/);

    const set = json(
      expectOk(
        await term.run([
          'organization',
          'security',
          'set',
          '--allow',
          '127.0.0.0/8,2001:db8::1/32',
          '--session-max-age',
          '12h',
          '--json',
        ]),
      ),
    );
    expect(set.security).to.deep.equal({
      require_two_factor: false,
      allowed_ip_ranges: ['127.0.0.0/8', '2001:db8::/32'],
      session_max_age: 43_200,
    });
    const again = expectOk(
      await term.run(['organization', 'security', 'set', '--session-max-age', 'default']),
    );
    expect(again.stdout).to.match(/allowed addresses:\s+127\.0\.0\.0\/8, 2001:db8::\/32/);
    expect(again.stdout).to.match(/session max age:\s+the server’s setting/);

    expectFailure(
      await term.run(['organization', 'security', 'set', '--allow', '10.0.0.0/8']),
      5,
      /127\.0\.0\.1.*\[CONFLICT, request req_[a-z0-9]+\]/,
    );
    expectFailure(await term.run(['organization', 'security', 'set']), 2, /nothing to change/, null);
  });

  it('refuses members (exit 3) and, with two-factor required, tells the user how to turn it on', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const member = await createUser(s.deps, owner.organizationId);
    const memberTerm = await signIn(member);
    expectFailure(await memberTerm.run(['organization', 'security', 'show']), 3, /FORBIDDEN/);

    const term = await signIn(owner);
    expectOk(await term.run(['organization', 'security', 'set', '--require-two-factor']));
    expectFailure(
      await memberTerm.run(['vpn', 'list']),
      3,
      /POST \/v1\/auth\/2fa\/setup.*\[TWO_FACTOR_REQUIRED/,
      /cloud two-factor setup/,
    );
  });
});
