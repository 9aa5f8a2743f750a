// Test tier: server
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import { TwoFactorRequiredError, createClient } from '@cloud-platform/client';
import { createOrg } from '../support/factories.js';
import { FakeClock } from '../support/fake-clock.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { rejection } from '../support/rejection.js';

describe('client SDK: two-factor sign-in', () => {
  let s: TestServer;
  const clock = new FakeClock('2026-11-24T12:00:00.000Z');
  before(async () => {
    s = await startTestServer({ clock });
  });
  after(async () => {
    await s?.close();
  });

  it('login() asks the twoFactor callback for the code, or rejects with TwoFactorRequiredError to verify later', async () => {
    const owner = await createOrg(s.deps);
    const client = createClient({ baseUrl: s.baseUrl, token: owner.token });
    const { otpauth_url } = await client.auth.twoFactor.setup.mutate({});
    const authenticator = URI.parse(otpauth_url) as TOTP;
    const code = () => authenticator.generate({ timestamp: clock.now().getTime() });
    await client.auth.twoFactor.enable.mutate({ password: owner.password, code: code() });

    clock.advance(30_000);
    const fresh = createClient({ baseUrl: s.baseUrl });
    const asked: number[] = [];
    const res = await fresh.login(owner.email, owner.password, {
      twoFactor: ({ expiresIn }) => {
        asked.push(expiresIn);
        return { code: code() };
      },
    });
    expect(asked).to.deep.equal([300]);
    expect(res.user.id).to.equal(owner.id);
    expect(fresh.getTokens().token).to.equal(res.token);
    expect((await fresh.auth.me.query()).user.two_factor_enabled).to.equal(true);

    clock.advance(30_000);
    const later = createClient({ baseUrl: s.baseUrl });
    const err = await rejection(later.login(owner.email, owner.password));
    expect(err).to.be.instanceOf(TwoFactorRequiredError);
    const { challengeToken } = err as TwoFactorRequiredError;
    const done = await later.verifyTwoFactor(challengeToken, { code: code() });
    expect(later.getTokens().token).to.equal(done.token);
  });
});
