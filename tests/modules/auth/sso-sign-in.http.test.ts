// Test tier: server
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { http } from '../../support/http.js';
import { createOrg, DEFAULT_PASSWORD } from '../../support/factories.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { expectError } from '../../transport/envelope.js';
import { codeOnPage, ssoSignIn, ssoSignInSetUp, stateOf } from './sso-sign-in.fixtures.js';

/**
 * `POST /v1/auth/sso/start` and `POST /v1/auth/sso/token` over HTTP (docs/sso.md, "Signing in"): no token, exact
 * bodies, the login's per-address limit, and the token's answer the same as `POST /v1/auth/login`'s.
 */
describe('single sign-on over HTTP: /v1/auth/sso/start and /v1/auth/sso/token', function () {
  this.timeout(60_000);
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(async () => {
    await s?.close();
  });

  const post = (path: string, body: unknown, server: TestServer = s) =>
    http(server.baseUrl, 'POST', path, { body });

  async function enterprise(server: TestServer = s) {
    const owner = await createOrg(server.deps, { plan: 'enterprise' });
    const { domain } = await ssoSignInSetUp(server.deps, owner.organizationId);
    return { owner, domain };
  }

  it('start: 200 {success, authorization_url} without a token; 404 and 400 in the envelope', async () => {
    const { domain } = await enterprise();
    const ok = await post('/v1/auth/sso/start', {
      email: `grace@${domain}`,
      return_to: 'http://127.0.0.1:8976/callback',
    });
    expect(ok.status, ok.text).to.equal(200);
    expect(Object.keys(ok.body)).to.deep.equal(['success', 'authorization_url']);
    expect(stateOf(ok.body.authorization_url)).to.be.a('string');

    const unknown = await post('/v1/auth/sso/start', {
      email: `grace@nowhere-${randomBytes(4).toString('hex')}.test`,
    });
    const err = expectError(unknown, 'NOT_FOUND');
    expect(err.message).to.equal('Single sign-on connection for this email address not found');

    const badReturn = await post('/v1/auth/sso/start', {
      email: `grace@${domain}`,
      return_to: 'https://evil.example.test/callback',
    });
    const bad = expectError(badReturn, 'VALIDATION_ERROR');
    expect(bad.details).to.have.length(1);
    expect(bad.details![0].path).to.equal('return_to');
    expect(bad.message).to.match(/^Invalid request: return_to: /);

    expectError(await post('/v1/auth/sso/start', { email: `grace@${domain}`, extra: 1 }), 'VALIDATION_ERROR');
    expectError(await post('/v1/auth/sso/start', { email: 'not-an-email' }), 'VALIDATION_ERROR');
  });

  it('token: the body of /v1/auth/login, a session listed with method sso, audited as sso.token; a second use is 401', async () => {
    const { owner, domain } = await enterprise();
    const email = `ada@${domain}`;
    const code = codeOnPage(await ssoSignIn(s.deps, email, { email, name: 'Ada' }));
    const res = await post('/v1/auth/sso/token', { code });
    expect(res.status, res.text).to.equal(200);
    const login = await post('/v1/auth/login', { email: owner.email, password: DEFAULT_PASSWORD });
    expect(login.status, login.text).to.equal(200);
    expect(Object.keys(res.body)).to.deep.equal(Object.keys(login.body));
    expect(Object.keys(res.body.user)).to.deep.equal(Object.keys(login.body.user));
    expect(res.body).to.include({ success: true, token_type: 'Bearer', expires_in: login.body.expires_in });
    expect(res.body.refresh_token).to.match(/^rt_/);
    expect(res.body.user).to.include({ email, name: 'Ada', role: 'member', status: 'active' });

    const sessions = await http(s.baseUrl, 'GET', '/v1/auth/sessions', { token: res.body.token });
    expect(sessions.status, sessions.text).to.equal(200);
    expect(sessions.body.sessions).to.have.length(1);
    expect(sessions.body.sessions[0]).to.include({ current: true, method: 'sso' });
    const ownerSessions = await http(s.baseUrl, 'GET', '/v1/auth/sessions', { token: login.body.token });
    expect(ownerSessions.body.sessions.find((x: { current: boolean }) => x.current).method).to.equal(
      'password',
    );

    // The refresh token works like a password login's.
    const refreshed = await post('/v1/auth/refresh', { refresh_token: res.body.refresh_token });
    expect(refreshed.status, refreshed.text).to.equal(200);

    const audit = await s.deps.db.orm.em
      .fork()
      .execute<{ action: string; actor_id: string; status: number }[]>(
        `select action, actor_id, status from audit_logs where organization_id = ? and action like 'sso.%'`,
        [owner.organizationId],
      );
    expect(audit).to.deep.include({ action: 'sso.token', actor_id: res.body.user.id, status: 200 });

    const again = await post('/v1/auth/sso/token', { code });
    const err = expectError(again, 'INVALID_CREDENTIALS');
    expect(err.message).to.contain('POST /v1/auth/sso/start');
    expect(again.headers.get('www-authenticate')).to.equal('Bearer');
  });

  describe('per-address limits', () => {
    const LIMIT = 3;
    let limited: TestServer;
    before(async () => {
      limited = await startTestServer({
        env: { AUTH_RATE_LIMIT: String(LIMIT), AUTH_RATE_LIMIT_WINDOW: '60s' },
      });
    });
    after(async () => {
      await limited?.close();
    });

    it('start and token each have the login’s budget per address: 429 RATE_LIMITED with Retry-After beyond it', async () => {
      const { domain } = await enterprise(limited);
      for (let i = 0; i < LIMIT; i++) {
        const ok = await post('/v1/auth/sso/start', { email: `x@${domain}` }, limited);
        expect(ok.status, ok.text).to.equal(200);
      }
      const over = await post('/v1/auth/sso/start', { email: `x@${domain}` }, limited);
      const err = expectError(over, 'RATE_LIMITED');
      expect(err.message).to.match(new RegExp(`${LIMIT} per 60 s`));
      expect(Number(over.headers.get('retry-after'))).to.be.within(1, 60);

      // The token's budget is its own.
      for (let i = 0; i < LIMIT; i++) {
        expectError(
          await post('/v1/auth/sso/token', { code: 'ssoc_unknown' }, limited),
          'INVALID_CREDENTIALS',
        );
      }
      expectError(await post('/v1/auth/sso/token', { code: 'ssoc_unknown' }, limited), 'RATE_LIMITED');
    });
  });
});
