// Test tier: server
import { expect } from 'chai';
import { http } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { createOrg, uniqueEmail, signedIn } from '../../support/factories.js';
import { FakeClock } from '../../support/fake-clock.js';
import { expectError } from '../../transport/envelope.js';

/**
 * Everything of authentication that depends on time or on settings, on one server whose clock only the test moves,
 * with sign-up turned off and bcrypt cost 5.
 */
describe('auth over time (fake clock) and with non-default settings', () => {
  let s: TestServer;
  const clock = new FakeClock('2026-11-21T08:00:00.000Z');
  before(async () => {
    s = await startTestServer({ clock, env: { SIGNUP_ENABLED: 'false', BCRYPT_COST: '5' } });
  });
  after(async () => {
    await s?.close();
  });

  const login = (email: string, password: string) =>
    http(s.baseUrl, 'POST', '/v1/auth/login', { body: { email, password } });

  describe('settings', () => {
    it('SIGNUP_ENABLED=false: POST /auth/register answers 403 FORBIDDEN and creates nothing', async () => {
      const email = uniqueEmail('nosignup');
      const body = { email, password: 'a-good-password', name: 'N', organization_name: 'No Signup Co' };
      const res = await http(s.baseUrl, 'POST', '/v1/auth/register', { body });
      expectError(res, 'FORBIDDEN');
      const rows = await s.deps.db.orm.em.fork().execute('select id from users where email = ?', [email]);
      expect(rows).to.have.length(0);
      // Existing accounts still log in.
      const owner = await createOrg(s.deps);
      expect((await login(owner.email, owner.password)).status).to.equal(200);
    });

    it('BCRYPT_COST: new password hashes use the configured cost', async () => {
      const owner = await createOrg(s.deps);
      const [row] = await s.deps.db.orm.em
        .fork()
        .execute<{ password_hash: string }[]>('select password_hash from users where id = ?', [owner.id]);
      expect(row!.password_hash).to.match(/^\$2[aby]\$05\$/);
    });
  });

  describe('login throttling', () => {
    it('locks one email from one IP for 15 minutes after 10 failures, even with the right password', async () => {
      const owner = await createOrg(s.deps);
      for (let i = 1; i <= 10; i++) {
        const res = await login(owner.email, `wrong-password-${i}`);
        expect(res.status, `attempt ${i}`).to.equal(401);
        expect(res.body.error.code).to.equal('INVALID_CREDENTIALS');
      }
      const locked = await login(owner.email, owner.password);
      const err = expectError(locked, 'TOO_MANY_LOGIN_ATTEMPTS');
      expect(err.message).to.be.a('string');
      expect(locked.headers.get('retry-after')).to.equal('900');

      // Other IPs and other emails from this IP are not affected.
      const elsewhere = signedIn(
        await s.caller(undefined, { ip: '203.0.113.7' }).auth.login({
          email: owner.email,
          password: owner.password,
        }),
      );
      expect(elsewhere.user.id).to.equal(owner.id);
      const other = await createOrg(s.deps);
      expect((await login(other.email, other.password)).status).to.equal(200);

      // The same lock holds in-process and over /trpc, with the remaining time.
      clock.advance(15 * 60_000 - 1000);
      let thrown: any;
      await s
        .caller(undefined, { ip: '127.0.0.1' })
        .auth.login({ email: owner.email, password: owner.password })
        .catch((e: unknown) => (thrown = e));
      expect(thrown?.cause?.code).to.equal('TOO_MANY_LOGIN_ATTEMPTS');
      const stillLocked = await login(owner.email, owner.password);
      expectError(stillLocked, 'TOO_MANY_LOGIN_ATTEMPTS');
      expect(stillLocked.headers.get('retry-after')).to.equal('1');

      clock.advance(1000);
      const open = await login(owner.email, owner.password);
      expect(open.status).to.equal(200);
      // A success clears the count: one more failure does not lock again.
      expect((await login(owner.email, 'wrong-again')).status).to.equal(401);
      expect((await login(owner.email, owner.password)).status).to.equal(200);
    });

    it('counts failures within a 15-minute window only', async () => {
      const owner = await createOrg(s.deps);
      for (let i = 0; i < 9; i++) await login(owner.email, 'wrong-password');
      clock.advance(15 * 60_000 + 1000);
      // The nine old failures have expired: one more does not lock.
      expect((await login(owner.email, 'wrong-password')).status).to.equal(401);
      expect((await login(owner.email, owner.password)).status).to.equal(200);
    });

    it('throttles unknown emails the same way (no hint that the account does not exist)', async () => {
      const email = `ghost-${Date.now()}@example.test`;
      for (let i = 0; i < 10; i++) expect((await login(email, 'whatever-pass')).status).to.equal(401);
      expectError(await login(email, 'whatever-pass'), 'TOO_MANY_LOGIN_ATTEMPTS');
    });
  });

  describe('token lifetimes', () => {
    it('expires the access token after 3600 s (TOKEN_EXPIRED) and the refresh token after 30 days', async () => {
      const owner = await createOrg(s.deps);
      clock.advance(3599_000);
      expect((await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token })).status).to.equal(200);
      clock.advance(1000);
      const expired = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token });
      expectError(expired, 'TOKEN_EXPIRED');
      expect(expired.headers.get('www-authenticate')).to.equal('Bearer');

      // The refresh token still works after the access token expired.
      const refreshed = await http(s.baseUrl, 'POST', '/v1/auth/refresh', {
        body: { refresh_token: owner.refreshToken },
      });
      expect(refreshed.status).to.equal(200);

      clock.advance(30 * 86_400_000 + 1000);
      const late = await http(s.baseUrl, 'POST', '/v1/auth/refresh', {
        body: { refresh_token: refreshed.body.refresh_token },
      });
      expectError(late, 'INVALID_CREDENTIALS');
    });
  });
});
