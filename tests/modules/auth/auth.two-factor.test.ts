// Test tier: server
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import { Event } from '../../../server/events/event.entity.js';
import { createOrg, type TestUser } from '../../support/factories.js';
import { FakeClock } from '../../support/fake-clock.js';
import { http } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { expectError } from '../../transport/envelope.js';

/**
 * Two-factor sign-in as a new user takes it (docs/two-factor.md, "Two-factor sign-in"): codes computed by an authenticator
 * library from the `otpauth://` URL, on a server whose clock only the test moves (a code is good once per 30 s step).
 */
describe('two-factor sign-in (TOTP)', () => {
  let s: TestServer;
  const clock = new FakeClock('2026-11-24T10:00:00.000Z');
  before(async () => {
    s = await startTestServer({ clock });
  });
  after(async () => {
    await s?.close();
  });

  const post = (path: string, body: unknown, token?: string) =>
    http(s.baseUrl, 'POST', `/v1${path}`, { body, token });
  const codeAt = (authenticator: TOTP) => authenticator.generate({ timestamp: clock.now().getTime() });
  const nextStep = () => clock.advance(30_000);

  /** Setup and enable for `user`; returns the authenticator and the recovery codes. */
  async function enrol(user: TestUser): Promise<{ authenticator: TOTP; recoveryCodes: string[] }> {
    const setup = await post('/auth/2fa/setup', {}, user.token);
    expect(setup.status).to.equal(200);
    const authenticator = URI.parse(setup.body.otpauth_url) as TOTP;
    const enabled = await post(
      '/auth/2fa/enable',
      { password: user.password, code: codeAt(authenticator) },
      user.token,
    );
    expect(enabled.status).to.equal(200);
    return { authenticator, recoveryCodes: enabled.body.recovery_codes };
  }

  it('enrols, signs in with a challenge and a code, refuses a replayed code, then disables', async () => {
    const owner = await createOrg(s.deps);
    const setup = await post('/auth/2fa/setup', {}, owner.token);
    expect(setup.status).to.equal(200);
    expect(setup.body.secret).to.match(/^[A-Z2-7]{32}$/); // 160 bits, base32
    expect(setup.body.otpauth_url).to.match(/^otpauth:\/\/totp\/.+\?/);
    expect(setup.body.qr_code_svg).to.match(/^<svg[\s\S]*<\/svg>\s*$/);
    const authenticator = URI.parse(setup.body.otpauth_url) as TOTP;
    expect(authenticator.digits).to.equal(6);
    expect(authenticator.period).to.equal(30);
    expect(authenticator.algorithm).to.equal('SHA1');

    // A wrong first code is a validation error and enables nothing.
    const wrong = await post('/auth/2fa/enable', { password: owner.password, code: '000000' }, owner.token);
    expectError(wrong, 'VALIDATION_ERROR');
    const enableCode = codeAt(authenticator);
    const enabled = await post(
      '/auth/2fa/enable',
      { password: owner.password, code: enableCode },
      owner.token,
    );
    expect(enabled.status).to.equal(200);
    expect(enabled.body.recovery_codes).to.have.length(10);
    expect(new Set(enabled.body.recovery_codes).size).to.equal(10);
    const me = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token });
    expect(me.body.user.two_factor_enabled).to.equal(true);

    // The secret is stored encrypted, the recovery codes hashed.
    const em = s.deps.db.orm.em.fork();
    const [cred] = await em.execute<{ secret: string }[]>(
      'select secret from two_factor_credentials where user_id = ?',
      [owner.id],
    );
    expect(cred!.secret).to.not.include(setup.body.secret);
    const codes = await em.execute<{ code_hash: string }[]>(
      'select code_hash from recovery_codes where user_id = ?',
      [owner.id],
    );
    expect(codes.map((c) => c.code_hash)).to.not.include.members(enabled.body.recovery_codes);

    // Login answers a challenge, no tokens.
    const logins = async () =>
      await em.fork().count(Event, { organizationId: owner.organizationId, type: 'user.login' });
    const loginsBefore = await logins();
    const login = await post('/auth/login', { email: owner.email, password: owner.password });
    expect(login.status).to.equal(200);
    expect(login.body).to.have.keys(['success', 'two_factor_required', 'challenge_token', 'expires_in']);
    expect(login.body.two_factor_required).to.equal(true);
    expect(login.body.expires_in).to.equal(300);
    expect(await logins()).to.equal(loginsBefore);

    // The code accepted at `enable` (same step) is refused: a code works once.
    const replay = await post('/auth/2fa/verify', {
      challenge_token: login.body.challenge_token,
      code: enableCode,
    });
    expectError(replay, 'INVALID_CREDENTIALS');
    nextStep();
    const verified = await post('/auth/2fa/verify', {
      challenge_token: login.body.challenge_token,
      code: codeAt(authenticator),
    });
    expect(verified.status).to.equal(200);
    expect(verified.body).to.include.keys(['token', 'refresh_token', 'token_type', 'expires_in', 'user']);
    expect(verified.body.user.id).to.equal(owner.id);
    expect(await logins()).to.equal(loginsBefore + 1);
    // The challenge is spent.
    nextStep();
    const again = await post('/auth/2fa/verify', {
      challenge_token: login.body.challenge_token,
      code: codeAt(authenticator),
    });
    expectError(again, 'INVALID_CREDENTIALS');

    // Disable needs the password and a fresh code.
    const token = verified.body.token as string;
    const badPassword = await post(
      '/auth/2fa/disable',
      { password: 'not-the-password', code: codeAt(authenticator) },
      token,
    );
    expectError(badPassword, 'INVALID_CREDENTIALS');
    nextStep();
    const disabled = await post(
      '/auth/2fa/disable',
      { password: owner.password, code: codeAt(authenticator) },
      token,
    );
    expect(disabled.status).to.equal(200);
    const plain = await post('/auth/login', { email: owner.email, password: owner.password });
    expect(plain.status).to.equal(200);
    expect(plain.body.token).to.be.a('string');
    expect(plain.body.user.two_factor_enabled).to.equal(false);
    const rows = await em.fork().execute('select 1 from recovery_codes where user_id = ?', [owner.id]);
    expect(rows).to.have.length(0);
  });

  it('takes a recovery code once', async () => {
    const owner = await createOrg(s.deps);
    const { recoveryCodes } = await enrol(owner);
    const first = await post('/auth/login', { email: owner.email, password: owner.password });
    const ok = await post('/auth/2fa/verify', {
      challenge_token: first.body.challenge_token,
      recovery_code: recoveryCodes[3],
    });
    expect(ok.status).to.equal(200);
    const second = await post('/auth/login', { email: owner.email, password: owner.password });
    const reused = await post('/auth/2fa/verify', {
      challenge_token: second.body.challenge_token,
      recovery_code: recoveryCodes[3],
    });
    expectError(reused, 'INVALID_CREDENTIALS');
    // Another one still works on the same challenge.
    const other = await post('/auth/2fa/verify', {
      challenge_token: second.body.challenge_token,
      recovery_code: recoveryCodes[4],
    });
    expect(other.status).to.equal(200);
  });

  it('voids a challenge after five wrong codes', async () => {
    const owner = await createOrg(s.deps);
    const { authenticator } = await enrol(owner);
    nextStep();
    const login = await post('/auth/login', { email: owner.email, password: owner.password });
    for (let i = 0; i < 5; i++) {
      const wrong = await post('/auth/2fa/verify', {
        challenge_token: login.body.challenge_token,
        code: '123456',
      });
      expectError(wrong, 'INVALID_CREDENTIALS');
    }
    const right = await post('/auth/2fa/verify', {
      challenge_token: login.body.challenge_token,
      code: codeAt(authenticator),
    });
    expectError(right, 'INVALID_CREDENTIALS');
    expect(right.body.error.message).to.match(/sign in again/);
  });

  it('refuses bad input: both factors, neither, a malformed code, setup twice', async () => {
    const owner = await createOrg(s.deps);
    await enrol(owner);
    const login = await post('/auth/login', { email: owner.email, password: owner.password });
    const both = await post('/auth/2fa/verify', {
      challenge_token: login.body.challenge_token,
      code: '123456',
      recovery_code: 'abcd-efgh-jkmn',
    });
    expectError(both, 'VALIDATION_ERROR');
    const neither = await post('/auth/2fa/verify', { challenge_token: login.body.challenge_token });
    expectError(neither, 'VALIDATION_ERROR');
    const malformed = await post('/auth/2fa/verify', {
      challenge_token: login.body.challenge_token,
      code: '12ab56',
    });
    expectError(malformed, 'VALIDATION_ERROR');
    const unknown = await post('/auth/2fa/verify', { challenge_token: 'tfc_nope', code: '123456' });
    expectError(unknown, 'INVALID_CREDENTIALS');
    const setupAgain = await post('/auth/2fa/setup', {}, owner.token);
    expectError(setupAgain, 'CONFLICT');
    const noToken = await post('/auth/2fa/setup', {});
    expectError(noToken, 'UNAUTHORIZED');
  });

  it('emits user.updated when two-factor is enabled and disabled', async () => {
    const owner = await createOrg(s.deps);
    const em = s.deps.db.orm.em.fork();
    const updates = async () =>
      (await em.fork().find(Event, { organizationId: owner.organizationId, type: 'user.updated' })).map(
        (e) => (e.data as { object: { two_factor_enabled: boolean } }).object.two_factor_enabled,
      );
    const { authenticator } = await enrol(owner);
    expect(await updates()).to.deep.equal([true]);
    nextStep();
    const off = await post(
      '/auth/2fa/disable',
      { password: owner.password, code: codeAt(authenticator) },
      owner.token,
    );
    expect(off.status).to.equal(200);
    expect((await updates()).sort()).to.deep.equal([false, true]);
  });
});
