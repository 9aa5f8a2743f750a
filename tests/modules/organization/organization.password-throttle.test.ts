// Test tier: server
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import { createOrg, createUser, type TestUser } from '../../support/factories.js';
import { http, type HttpResult } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';

/**
 * Password confirmations count with the login throttle (docs/api-conventions.md, "Errors"): 10 wrong passwords for one email from one
 * address, and the next attempt is 429 `TOO_MANY_LOGIN_ATTEMPTS` for 15 minutes, even with the right password, at
 * the confirming operation and at login alike. Nothing is changed meanwhile.
 */
describe('password confirmations and the login throttle (HTTP)', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  const deleteOrg = (owner: TestUser, password: string) =>
    http(s.baseUrl, 'DELETE', '/v1/organization', {
      token: owner.token,
      body: { confirm: 'Throttled', password },
    });
  const transfer = (owner: TestUser, userId: string, password: string) =>
    http(s.baseUrl, 'POST', '/v1/organization/transfer-ownership', {
      token: owner.token,
      body: { user_id: userId, password },
    });

  function expectLocked(res: HttpResult) {
    expect(res.status, res.text).to.equal(429);
    expect(res.body.error.code).to.equal('TOO_MANY_LOGIN_ATTEMPTS');
    expect(Number(res.headers.get('retry-after'))).to.be.within(1, 900);
  }

  it('DELETE /organization: 10 wrong passwords, then 429 even with the right one; login is locked too', async () => {
    const owner = await createOrg(s.deps, { name: 'Throttled' });
    for (let i = 0; i < 10; i++) {
      const res = await deleteOrg(owner, `wrong-password-${i}`);
      expect(res.status, `attempt ${i + 1}`).to.equal(401);
      expect(res.body.error.code).to.equal('INVALID_CREDENTIALS');
    }
    expectLocked(await deleteOrg(owner, owner.password));
    expect((await http(s.baseUrl, 'GET', '/v1/organization', { token: owner.token })).status).to.equal(200);
    // The same throttle as sign-in: the owner's email is locked at login from this address.
    expectLocked(
      await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: owner.email, password: owner.password },
      }),
    );
  });

  it('POST /organization/transfer-ownership: 10 wrong passwords, then 429 even with the right one', async () => {
    const owner = await createOrg(s.deps);
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    for (let i = 0; i < 10; i++) {
      expect((await transfer(owner, admin.id, `wrong-password-${i}`)).status).to.equal(401);
    }
    expectLocked(await transfer(owner, admin.id, owner.password));
    const org = await http(s.baseUrl, 'GET', '/v1/organization', { token: owner.token });
    expect(org.body.organization.owner_id).to.equal(owner.id);
  });

  it('a sign-in lock applies to the confirmations: 10 failed logins, then DELETE /organization is 429', async () => {
    const owner = await createOrg(s.deps, { name: 'Throttled' });
    for (let i = 0; i < 10; i++) {
      await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: owner.email, password: `nope-${i}` },
      });
    }
    expectLocked(await deleteOrg(owner, owner.password));
    expectLocked(await transfer(owner, owner.id, owner.password));
  });

  it('POST /auth/2fa/enable needs the password: missing → 400, wrong → 401 and counted, then 429', async () => {
    const user = await createOrg(s.deps);
    const setup = await http(s.baseUrl, 'POST', '/v1/auth/2fa/setup', { token: user.token, body: {} });
    const code = () => (URI.parse(setup.body.otpauth_url) as TOTP).generate();
    const enable = (body: unknown) =>
      http(s.baseUrl, 'POST', '/v1/auth/2fa/enable', { token: user.token, body });

    const missing = await enable({ code: code() });
    expect(missing.status).to.equal(400);
    expect(missing.body.error.details.map((d: { path: string }) => d.path)).to.include('password');
    for (let i = 0; i < 10; i++) {
      const wrong = await enable({ password: `wrong-password-${i}`, code: code() });
      expect(wrong.status).to.equal(401);
      expect(wrong.body.error.code).to.equal('INVALID_CREDENTIALS');
    }
    expectLocked(await enable({ password: user.password, code: code() }));
    const me = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: user.token });
    expect(me.body.user.two_factor_enabled).to.equal(false);
  });

  it('POST /auth/2fa/enable with the right password and code turns it on', async () => {
    const user = await createOrg(s.deps);
    const setup = await http(s.baseUrl, 'POST', '/v1/auth/2fa/setup', { token: user.token, body: {} });
    const code = (URI.parse(setup.body.otpauth_url) as TOTP).generate();
    const res = await http(s.baseUrl, 'POST', '/v1/auth/2fa/enable', {
      token: user.token,
      body: { password: user.password, code },
    });
    expect(res.status, res.text).to.equal(200);
    expect(res.body.recovery_codes).to.have.length(10);
  });
});
