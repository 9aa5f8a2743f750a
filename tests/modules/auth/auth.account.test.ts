// Test tier: server
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import { MemoryMailDriver } from '../../../server/mail/mail-driver.js';
import { createOrg, uniqueEmail, type TestUser } from '../../support/factories.js';
import { FakeClock } from '../../support/fake-clock.js';
import { http } from '../../support/http.js';
import { sessionIdOf } from '../../support/security-fixtures.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';

/** docs/accounts-and-sessions.md, "Accounts and sessions": password change and reset, the list of sessions, their absolute lifetime. */
describe('accounts and sessions (docs/accounts-and-sessions.md, "Accounts and sessions")', function () {
  this.timeout(60_000);
  const DAY = 86_400_000;
  let s: TestServer;
  const clock = new FakeClock('2026-11-24T09:00:00.000Z');
  const outbox = new MemoryMailDriver();
  // On PostgreSQL a database of its own: reset mails are sent by a job, which another test server on the run's
  // database (with another mail driver and clock) could otherwise take.
  let scratch: ScratchDatabase | undefined;
  before(async () => {
    scratch = await ownPostgresDatabase('auth_account');
    s = await startTestServer({
      clock,
      mail: outbox,
      env: { DATABASE_URL: scratch?.url ?? process.env.DATABASE_URL },
    });
  });
  after(async () => {
    await s?.close();
    await scratch?.drop();
  });

  const login = async (email: string, password: string, userAgent = 'test-agent') => {
    const res = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email, password },
      headers: { 'user-agent': userAgent },
    });
    expect(res.status, res.text).to.equal(200);
    return { token: res.body.token as string, refresh: res.body.refresh_token as string };
  };
  const me = async (token: string) => (await http(s.baseUrl, 'GET', '/v1/auth/me', { token })).status;
  const refresh = async (refreshToken: string) =>
    http(s.baseUrl, 'POST', '/v1/auth/refresh', { body: { refresh_token: refreshToken } });

  /** The reset mail's token once the job sent it. */
  async function mailedResetToken(email: string): Promise<string> {
    const mail = await waitFor(
      `a reset mail to ${email}`,
      () => outbox.sent.find((m) => m.to === email && m.kind === 'password_reset'),
      { timeoutMs: 10_000 },
    );
    const link = /(https?:\/\/\S+\/reset-password\?token=\S+)/.exec(mail.text)![1]!;
    expect(mail.link).to.equal(link);
    return new URL(link).searchParams.get('token')!;
  }

  describe('POST /auth/password', () => {
    it('changes the password and signs out every other session, keeping this one', async () => {
      const owner = await createOrg(s.deps);
      const other = await login(owner.email, owner.password);
      const res = await http(s.baseUrl, 'POST', '/v1/auth/password', {
        token: owner.token,
        body: { current_password: owner.password, new_password: 'the-new-password' },
      });
      expect(res.status).to.equal(200);
      expect(res.body).to.include({ success: true, sessions_revoked: 1 });
      expect(await me(owner.token)).to.equal(200);
      expect(await me(other.token)).to.equal(401);
      expect((await refresh(other.refresh)).status).to.equal(401);
      expect((await refresh(owner.refreshToken)).status).to.equal(200);
      const old = await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: owner.email, password: owner.password },
      });
      expect(old.status).to.equal(401);
      await login(owner.email, 'the-new-password');
    });

    it('refuses a wrong current password with 401 and changes nothing', async () => {
      const owner = await createOrg(s.deps);
      const other = await login(owner.email, owner.password);
      const res = await http(s.baseUrl, 'POST', '/v1/auth/password', {
        token: owner.token,
        body: { current_password: 'not-the-password', new_password: 'the-new-password' },
      });
      expect(res.status).to.equal(401);
      expect(res.body.error.code).to.equal('INVALID_CREDENTIALS');
      expect(await me(other.token)).to.equal(200);
      await login(owner.email, owner.password);
    });
  });

  describe('password reset by mail', () => {
    it('answers 202 with the same body for a known and an unknown address', async () => {
      const owner = await createOrg(s.deps);
      const known = await http(s.baseUrl, 'POST', '/v1/auth/password-reset', {
        body: { email: owner.email },
      });
      const unknown = await http(s.baseUrl, 'POST', '/v1/auth/password-reset', {
        body: { email: uniqueEmail('nobody') },
      });
      expect(known.status).to.equal(202);
      expect(unknown.status).to.equal(202);
      expect(known.body).to.deep.equal(unknown.body);
      await mailedResetToken(owner.email);
    });

    it('resets the password with the mailed token once, and signs out every session', async () => {
      const owner = await createOrg(s.deps);
      const second = await login(owner.email, owner.password);
      expect(
        (
          await http(s.baseUrl, 'POST', '/v1/auth/password-reset', {
            body: { email: owner.email.toUpperCase() },
          })
        ).status,
      ).to.equal(202);
      const token = await mailedResetToken(owner.email);
      expect(token).to.match(/^pwr_[A-Za-z0-9_-]{43}$/);
      const stored = await s.deps.db.orm.em
        .fork()
        .execute<{ token_hash: string }[]>(
          'select token_hash from password_reset_tokens t join users u on u.id = t.user_id where u.email = ?',
          [owner.email],
        );
      expect(stored).to.have.length(1);
      expect(stored[0]!.token_hash)
        .to.match(/^[0-9a-f]{64}$/)
        .and.not.equal(token);

      const res = await http(s.baseUrl, 'POST', '/v1/auth/password-reset/confirm', {
        body: { token, new_password: 'a-reset-password' },
      });
      expect(res.status).to.equal(200);
      for (const t of [owner.token, second.token]) expect(await me(t)).to.equal(401);
      for (const r of [owner.refreshToken, second.refresh]) expect((await refresh(r)).status).to.equal(401);
      await login(owner.email, 'a-reset-password');

      const again = await http(s.baseUrl, 'POST', '/v1/auth/password-reset/confirm', {
        body: { token, new_password: 'another-password' },
      });
      expect(again.status).to.equal(401);
      expect(again.body.error.code).to.equal('INVALID_CREDENTIALS');
    });

    it('refuses an expired token (PASSWORD_RESET_TTL, 30 minutes by default)', async () => {
      const owner = await createOrg(s.deps);
      await http(s.baseUrl, 'POST', '/v1/auth/password-reset', { body: { email: owner.email } });
      const token = await mailedResetToken(owner.email);
      clock.advance(31 * 60_000);
      const res = await http(s.baseUrl, 'POST', '/v1/auth/password-reset/confirm', {
        body: { token, new_password: 'a-reset-password' },
      });
      expect(res.status).to.equal(401);
      await login(owner.email, owner.password);
    });
  });

  describe('sessions', () => {
    it('lists the caller’s live sessions, marks the current one, revokes one and 404s another user’s', async () => {
      const owner = await createOrg(s.deps);
      clock.advance(1000);
      const laptop = await login(owner.email, owner.password, 'laptop-browser');
      const stranger: TestUser = await createOrg(s.deps);

      const list = await http(s.baseUrl, 'GET', '/v1/auth/sessions', { token: laptop.token });
      expect(list.status).to.equal(200);
      expect(list.body.total).to.equal(2);
      const [first, second] = list.body.sessions;
      expect(first).to.deep.equal({
        id: sessionIdOf(laptop.token),
        created_at: clock.now().toISOString(),
        last_used_at: clock.now().toISOString(),
        expires_at: new Date(clock.now().getTime() + 30 * DAY).toISOString(),
        ip: '127.0.0.1',
        user_agent: 'laptop-browser',
        current: true,
        method: 'password',
      });
      expect(second).to.include({ id: sessionIdOf(owner.token), current: false });

      const foreign = await http(s.baseUrl, 'DELETE', `/v1/auth/sessions/${sessionIdOf(stranger.token)}`, {
        token: laptop.token,
      });
      expect(foreign.status).to.equal(404);
      expect(await me(stranger.token)).to.equal(200);

      const revoked = await http(s.baseUrl, 'DELETE', `/v1/auth/sessions/${sessionIdOf(owner.token)}`, {
        token: laptop.token,
      });
      expect(revoked.status).to.equal(200);
      expect(revoked.body).to.include({ success: true, id: sessionIdOf(owner.token) });
      expect(await me(owner.token)).to.equal(401);
      expect((await refresh(owner.refreshToken)).status).to.equal(401);
      expect(
        (
          await http(s.baseUrl, 'DELETE', `/v1/auth/sessions/${sessionIdOf(owner.token)}`, {
            token: laptop.token,
          })
        ).status,
      ).to.equal(404);
    });

    it('signs out everywhere, or everywhere else with keep_current', async () => {
      const owner = await createOrg(s.deps);
      const a = await login(owner.email, owner.password);
      const b = await login(owner.email, owner.password);
      const kept = await http(s.baseUrl, 'POST', '/v1/auth/sessions/revoke-all', {
        token: a.token,
        body: { keep_current: true },
      });
      expect(kept.status).to.equal(200);
      expect(kept.body.revoked).to.equal(2);
      expect(await me(a.token)).to.equal(200);
      expect(await me(b.token)).to.equal(401);
      expect(await me(owner.token)).to.equal(401);

      const all = await http(s.baseUrl, 'POST', '/v1/auth/sessions/revoke-all', { token: a.token });
      expect(all.status).to.equal(200);
      expect(all.body.revoked).to.equal(1);
      expect(await me(a.token)).to.equal(401);
      expect((await refresh(a.refresh)).status).to.equal(401);
    });

    it('cannot be refreshed past SESSION_MAX_AGE (90 days) after the sign-in', async () => {
      const owner = await createOrg(s.deps);
      let tokens = { token: owner.token, refresh: owner.refreshToken };
      for (let i = 0; i < 3; i++) {
        clock.advance(25 * DAY);
        const res = await refresh(tokens.refresh);
        expect(res.status, `refresh after ${(i + 1) * 25} days`).to.equal(200);
        tokens = { token: res.body.token, refresh: res.body.refresh_token };
      }
      clock.advance(14 * DAY); // 89 days
      const last = await refresh(tokens.refresh);
      expect(last.status).to.equal(200);
      const list = await http(s.baseUrl, 'GET', '/v1/auth/sessions', { token: last.body.token });
      const created = new Date(list.body.sessions[0].created_at).getTime();
      expect(new Date(list.body.sessions[0].expires_at).getTime()).to.equal(created + 90 * DAY);
      clock.advance(DAY + 1000); // past 90 days
      expect(await me(last.body.token)).to.equal(401);
      expect((await refresh(last.body.refresh_token)).status).to.equal(401);
    });
  });

  it('enabling two-factor signs out every other session', async () => {
    const owner = await createOrg(s.deps);
    const other = await login(owner.email, owner.password);
    const setup = await http(s.baseUrl, 'POST', '/v1/auth/2fa/setup', { token: owner.token, body: {} });
    const authenticator = URI.parse(setup.body.otpauth_url) as TOTP;
    const enabled = await http(s.baseUrl, 'POST', '/v1/auth/2fa/enable', {
      token: owner.token,
      body: { password: owner.password, code: authenticator.generate({ timestamp: clock.now().getTime() }) },
    });
    expect(enabled.status).to.equal(200);
    expect(await me(owner.token)).to.equal(200);
    expect(await me(other.token)).to.equal(401);
    expect((await refresh(other.refresh)).status).to.equal(401);
  });
});
