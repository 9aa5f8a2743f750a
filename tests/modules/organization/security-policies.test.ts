// Test tier: server
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import { Organization } from '../../../server/access/organization.entity.js';
import { Event } from '../../../server/events/event.entity.js';
import type { PlanId } from '../../../server/lib/plans.js';
import { createOrg, createUser, type TestUser } from '../../support/factories.js';
import { FakeClock } from '../../support/fake-clock.js';
import { http } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { codeOnPage, ssoSignIn, ssoSignInSetUp } from '../auth/sso-sign-in.fixtures.js';

/**
 * The organization's security policy over HTTP (docs/organization.md, "Security policies"): Enterprise only, owner
 * writes and admin reads, audited, with `organization.updated`; each rule with its code (two-factor required, allowed
 * address ranges behind a trusted proxy, the session's age with a fake clock), their exceptions, and other
 * organizations untouched.
 */

const HOUR = 3_600_000;

describe('security policies: GET/PUT /v1/organization/security and their rules', function () {
  this.timeout(120_000);
  // A year ahead of the real time: the sessions it dates must not look expired to the real clocks of other servers
  // on the same database, whose purge of expired sessions would otherwise remove them during a test.
  const clock = new FakeClock(new Date(Date.UTC(new Date().getUTCFullYear() + 1, 11, 1, 9)));
  /** Behind a proxy: the client address is the `X-Forwarded-For` the proxy sets. */
  let s: TestServer;
  /** Without TRUST_PROXY: the address is the socket's, whatever the headers say. */
  let direct: TestServer;

  before(async () => {
    s = await startTestServer({ clock, env: { TRUST_PROXY: 'true', SESSION_MAX_AGE: '3h' } });
    direct = await startTestServer();
  });

  after(async () => {
    await s?.close();
    await direct?.close();
  });

  /** A request from `ip` (through the proxy, which names the client in `X-Forwarded-For`). */
  const call = (
    method: string,
    path: string,
    token: string | undefined,
    opts: { body?: unknown; ip?: string; server?: TestServer } = {},
  ) =>
    http((opts.server ?? s).baseUrl, method, `/v1${path}`, {
      ...(token ? { token } : {}),
      ...(opts.body === undefined ? {} : { body: opts.body }),
      headers: {
        'x-forwarded-proto': 'https',
        ...(opts.ip ? { 'x-forwarded-for': opts.ip } : {}),
      },
    });
  const get = (token: string, ip?: string) => call('GET', '/organization/security', token, { ip });
  const put = (token: string, body: unknown, ip?: string) =>
    call('PUT', '/organization/security', token, { body, ip });

  const enterprise = () => createOrg(s.deps, { plan: 'enterprise' });

  const events = (organizationId: string) =>
    s.deps.db.orm.em
      .fork()
      .find(Event, { organizationId, type: 'organization.updated' }, { orderBy: { seq: 'asc' } });
  const auditEntries = (organizationId: string, action: string) =>
    s.deps.db.orm.em
      .fork()
      .execute<{ action: string; actor_id: string; status: number; ip: string | null }[]>(
        `select action, actor_id, status, ip from audit_logs where organization_id = ? and action = ?
          order by created_at, id`,
        [organizationId, action],
      );
  const storedPolicy = async (organizationId: string) => {
    const org = await s.deps.db.orm.em.fork().findOneOrFail(Organization, organizationId, { refresh: true });
    return {
      require_two_factor: org.requireTwoFactor,
      allowed_ip_ranges: [...org.allowedIpRanges],
      session_max_age: org.sessionMaxAge ?? null,
    };
  };
  const NONE = { require_two_factor: false, allowed_ip_ranges: [], session_max_age: null };

  /** An API key of `user` (its secret), made from `ip`. */
  const apiKeyOf = async (user: TestUser, ip?: string): Promise<string> => {
    const res = await call('POST', '/api-keys', user.token, {
      body: { name: 'policy key', permissions: ['vpn:read'] },
      ip,
    });
    expect(res.status, res.text).to.equal(201);
    return res.body.secret as string;
  };

  describe('the plan', () => {
    for (const plan of ['starter', 'pro'] as PlanId[]) {
      it(`answers 402 PLAN_LIMIT_EXCEEDED (advanced_security) to GET and PUT on ${plan}, and stores nothing`, async () => {
        const owner = await createOrg(s.deps, { plan });
        for (const res of [await get(owner.token), await put(owner.token, { require_two_factor: true })]) {
          expect(res.status, res.text).to.equal(402);
          expect(res.body.error.code).to.equal('PLAN_LIMIT_EXCEEDED');
          expect(res.body.error.details).to.deep.equal([
            { resource: 'advanced_security', limit: 0, current: 0 },
          ]);
          expect(res.body.error.message).to.include('Enterprise');
        }
        expect(await storedPolicy(owner.organizationId)).to.deep.equal(NONE);
        expect(await events(owner.organizationId)).to.have.length(0);
      });
    }

    it('is not applied below Enterprise: a policy kept through a downgrade binds nobody until the plan has it again', async () => {
      const owner = await enterprise();
      const member = await createUser(s.deps, owner.organizationId);
      expect((await put(owner.token, { require_two_factor: true })).status).to.equal(200);
      expect((await call('GET', '/vpn/connections', member.token)).body.error.code).to.equal(
        'TWO_FACTOR_REQUIRED',
      );
      const em = s.deps.db.orm.em.fork();
      await em.nativeUpdate(Organization, { id: owner.organizationId }, { plan: 'pro' });
      expect((await call('GET', '/vpn/connections', member.token)).status).to.equal(200);
      await em.nativeUpdate(Organization, { id: owner.organizationId }, { plan: 'enterprise' });
      expect((await call('GET', '/vpn/connections', member.token)).status).to.equal(403);
    });
  });

  describe('roles', () => {
    it('lets admins read, keeps writes to the owner, refuses members and API keys', async () => {
      const owner = await enterprise();
      const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const member = await createUser(s.deps, owner.organizationId, { role: 'member' });
      const key = await apiKeyOf(owner);

      const read = await get(admin.token);
      expect(read.status, read.text).to.equal(200);
      expect(read.body).to.deep.equal({ success: true, security: NONE });

      for (const res of [
        await put(admin.token, { require_two_factor: true }),
        await get(member.token),
        await put(member.token, { require_two_factor: true }),
        await get(key),
        await put(key, { require_two_factor: true }),
      ]) {
        expect(res.status, res.text).to.equal(403);
        expect(res.body.error.code).to.equal('FORBIDDEN');
      }
      expect(await storedPolicy(owner.organizationId)).to.deep.equal(NONE);
    });
  });

  describe('PUT and GET', () => {
    it('round-trips the policy, normalised, with organization.updated and an audit entry per change', async () => {
      const owner = await enterprise();
      const res = await put(owner.token, {
        require_two_factor: false,
        allowed_ip_ranges: [
          '127.0.0.1',
          '10.1.2.3/8',
          '2001:DB8:0:0::1/32',
          '::ffff:192.0.2.0/120',
          '10.0.0.0/8',
        ],
        session_max_age: 7_200,
      });
      expect(res.status, res.text).to.equal(200);
      const expected = {
        require_two_factor: false,
        allowed_ip_ranges: ['127.0.0.1/32', '10.0.0.0/8', '2001:db8::/32', '192.0.2.0/24'],
        session_max_age: 7_200,
      };
      expect(res.body).to.deep.equal({ success: true, security: expected });
      expect((await get(owner.token)).body.security).to.deep.equal(expected);
      expect(await storedPolicy(owner.organizationId)).to.deep.equal(expected);

      // Fields left out keep their values; null gives session_max_age back to the server.
      const partial = await put(owner.token, { session_max_age: null });
      expect(partial.body.security).to.deep.equal({ ...expected, session_max_age: null });

      // The same values again: nothing changes, so no event (the audit entry is the request's).
      expect((await put(owner.token, { session_max_age: null })).status).to.equal(200);

      const recorded = await events(owner.organizationId);
      expect(recorded).to.have.length(2);
      expect(recorded[0]!.data).to.have.nested.property('object.id', owner.organizationId);
      const audit = await auditEntries(owner.organizationId, 'organization.security.set');
      expect(audit.map((a) => [a.actor_id, a.status])).to.deep.equal([
        [owner.id, 200],
        [owner.id, 200],
        [owner.id, 200],
      ]);

      // An empty list lifts the restriction.
      const cleared = await put(owner.token, { allowed_ip_ranges: [] });
      expect(cleared.body.security.allowed_ip_ranges).to.deep.equal([]);
    });

    it('refuses invalid input with 400 in the envelope and changes nothing', async () => {
      const owner = await enterprise();
      // (Two-factor not required: the owner, without it, would be refused before its input is read.)
      const before = {
        require_two_factor: false,
        allowed_ip_ranges: ['127.0.0.0/8'],
        session_max_age: 86_400,
      };
      expect((await put(owner.token, before)).status).to.equal(200);
      const eventsBefore = (await events(owner.organizationId)).length;

      const cases: [unknown, string][] = [
        [{ allowed_ip_ranges: ['127.0.0.0/8', '10.0.0.0/33'] }, 'allowed_ip_ranges.1'],
        [{ allowed_ip_ranges: ['not-an-address'] }, 'allowed_ip_ranges.0'],
        [{ allowed_ip_ranges: ['fe80::1%eth0/64'] }, 'allowed_ip_ranges.0'],
        [{ allowed_ip_ranges: ['127.1/8'] }, 'allowed_ip_ranges.0'],
        [{ allowed_ip_ranges: Array.from({ length: 101 }, (_, i) => `10.0.${i}.0/24`) }, 'allowed_ip_ranges'],
        [{ session_max_age: 60 }, 'session_max_age'],
        [{ session_max_age: 366 * 86_400 }, 'session_max_age'],
        [{ session_max_age: 3_600.5 }, 'session_max_age'],
        [{ require_two_factor: 'yes' }, 'require_two_factor'],
        [{ enforce: true }, ''],
      ];
      for (const [body, path] of cases) {
        const res = await put(owner.token, body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.success).to.equal(false);
        expect(res.body.error.code).to.equal('VALIDATION_ERROR');
        if (path) expect(res.body.error.details.map((d: { path: string }) => d.path)).to.include(path);
      }
      // 100 ranges are allowed.
      const hundred = ['127.0.0.0/8', ...Array.from({ length: 99 }, (_, i) => `10.0.${i}.0/24`)];
      const ok = await put(owner.token, { allowed_ip_ranges: hundred });
      expect(ok.status, ok.text).to.equal(200);
      expect(ok.body.security.allowed_ip_ranges).to.have.length(100);
      expect((await put(owner.token, before)).status).to.equal(200);
      expect(await storedPolicy(owner.organizationId)).to.deep.equal(before);
      expect(await events(owner.organizationId)).to.have.length(eventsBefore + 2);
    });
  });

  describe('require_two_factor', () => {
    const codeAt = (authenticator: TOTP) => authenticator.generate({ timestamp: clock.now().getTime() });

    it('answers 403 TWO_FACTOR_REQUIRED to users without it, but for /auth/me, /auth/logout and turning it on', async () => {
      const owner = await enterprise();
      const member = await createUser(s.deps, owner.organizationId);
      const leaving = await createUser(s.deps, owner.organizationId);
      expect((await put(owner.token, { require_two_factor: true })).status).to.equal(200);

      const refused = await call('GET', '/vpn/connections', member.token);
      expect(refused.status, refused.text).to.equal(403);
      expect(refused.body.error.code).to.equal('TWO_FACTOR_REQUIRED');
      expect(refused.body.error.message).to.include('POST /v1/auth/2fa/setup');
      expect(refused.body.error.message).to.include('POST /v1/auth/2fa/enable');
      // The owner too, on anything but the exceptions (its policy applies to everyone).
      expect((await get(owner.token)).body.error.code).to.equal('TWO_FACTOR_REQUIRED');
      // A refused change is refused before it runs, and audited as refused.
      const create = await call('POST', '/vpn/connections', member.token, {
        body: { name: 'x', location: 'eu-west', protocol: 'wireguard' },
      });
      expect(create.status).to.equal(403);
      expect(create.body.error.code).to.equal('TWO_FACTOR_REQUIRED');
      const refusedAudit = await auditEntries(owner.organizationId, 'vpn.connections.create');
      expect(refusedAudit.map((a) => [a.actor_id, a.status])).to.deep.equal([[member.id, 403]]);

      // The exceptions.
      const me = await call('GET', '/auth/me', member.token);
      expect(me.status, me.text).to.equal(200);
      expect(me.body.user.id).to.equal(member.id);
      expect((await call('POST', '/auth/logout', leaving.token, { body: {} })).status).to.equal(200);
      const setup = await call('POST', '/auth/2fa/setup', member.token, { body: {} });
      expect(setup.status, setup.text).to.equal(200);
      const authenticator = URI.parse(setup.body.otpauth_url) as TOTP;
      const enabled = await call('POST', '/auth/2fa/enable', member.token, {
        body: { password: member.password, code: codeAt(authenticator) },
      });
      expect(enabled.status, enabled.text).to.equal(200);

      // With two-factor on, the same session goes on.
      const after = await call('GET', '/vpn/connections', member.token);
      expect(after.status, after.text).to.equal(200);
    });

    it('lets users signed in through SSO and API keys through', async () => {
      const owner = await enterprise();
      // An admin, who may make API keys.
      const member = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const key = await apiKeyOf(member);
      const { domain } = await ssoSignInSetUp(s.deps, owner.organizationId);
      const answer = await ssoSignIn(s.deps, `jit@${domain}`);
      const signIn = await call('POST', '/auth/sso/token', undefined, { body: { code: codeOnPage(answer) } });
      expect(signIn.status, signIn.text).to.equal(200);
      expect((await put(owner.token, { require_two_factor: true })).status).to.equal(200);

      // The SSO user has no two-factor of its own: the identity provider signed it in.
      const viaSso = await call('GET', '/vpn/connections', signIn.body.token as string);
      expect(viaSso.status, viaSso.text).to.equal(200);
      // API keys are not a user signing in.
      const viaKey = await call('GET', '/vpn/connections', key);
      expect(viaKey.status, viaKey.text).to.equal(200);
      // The key's creator, signed in with a password alone, is refused.
      expect((await call('GET', '/vpn/connections', member.token)).status).to.equal(403);
    });

    it('leaves other organizations alone', async () => {
      const owner = await enterprise();
      expect((await put(owner.token, { require_two_factor: true })).status).to.equal(200);
      const other = await enterprise();
      const otherMember = await createUser(s.deps, other.organizationId);
      expect((await call('GET', '/vpn/connections', otherMember.token)).status).to.equal(200);
      const o = await call('GET', '/vpn/connections', other.token);
      expect(o.status, o.text).to.equal(200);
    });
  });

  describe('allowed_ip_ranges (behind a proxy: TRUST_PROXY=true, X-Forwarded-For)', () => {
    const OFFICE = '203.0.113.5';
    const RANGES = ['203.0.113.0/24', '2001:db8::/32'];

    it('refuses users and API keys from any other address with 403 IP_NOT_ALLOWED', async () => {
      const owner = await enterprise();
      // An admin, who may make API keys.
      const member = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const key = await apiKeyOf(member);
      const set = await put(owner.token, { allowed_ip_ranges: RANGES }, OFFICE);
      expect(set.status, set.text).to.equal(200);

      for (const ip of ['203.0.113.77', '2001:db8::9', '::ffff:203.0.113.8']) {
        const res = await call('GET', '/vpn/connections', member.token, { ip });
        expect(res.status, `${ip}: ${res.text}`).to.equal(200);
        expect((await call('GET', '/vpn/connections', key, { ip })).status, ip).to.equal(200);
      }
      for (const ip of ['198.51.100.7', '2001:db9::1', '::ffff:198.51.100.7', '127.0.0.1']) {
        for (const token of [member.token, key]) {
          const res = await call('GET', '/vpn/connections', token, { ip });
          expect(res.status, `${ip}: ${res.text}`).to.equal(403);
          expect(res.body.error.code).to.equal('IP_NOT_ALLOWED');
        }
      }
      const refused = await call('GET', '/auth/me', member.token, { ip: '198.51.100.7' });
      expect(refused.body.error.message).to.include('198.51.100.7');
      // No header: the proxy's own address (loopback) is the client, and it is not allowed either.
      expect((await call('GET', '/auth/me', member.token)).body.error.code).to.equal('IP_NOT_ALLOWED');

      // A refused change is audited with the address it came from.
      const del = await call('DELETE', `/api-keys/key_${'0'.repeat(24)}`, member.token, {
        ip: '198.51.100.7',
      });
      expect(del.status, del.text).to.equal(403);
      const audit = await auditEntries(owner.organizationId, 'apiKeys.revoke');
      expect(audit.map((a) => [a.actor_id, a.status, a.ip])).to.deep.equal([
        [member.id, 403, '198.51.100.7'],
      ]);

      // The empty list lifts the restriction.
      expect((await put(owner.token, { allowed_ip_ranges: [] }, OFFICE)).status).to.equal(200);
      expect((await call('GET', '/vpn/connections', member.token, { ip: '198.51.100.7' })).status).to.equal(
        200,
      );
    });

    it('refuses with 409 a list that would shut the caller out, and changes nothing', async () => {
      const owner = await enterprise();
      const res = await put(owner.token, { allowed_ip_ranges: ['10.0.0.0/8'] }, OFFICE);
      expect(res.status, res.text).to.equal(409);
      expect(res.body.error.code).to.equal('CONFLICT');
      expect(res.body.error.message).to.include(OFFICE);
      // The same for an IPv6 caller outside the IPv6 range.
      expect((await put(owner.token, { allowed_ip_ranges: RANGES }, '2001:db9::1')).status).to.equal(409);
      expect(await storedPolicy(owner.organizationId)).to.deep.equal(NONE);
      expect(await events(owner.organizationId)).to.have.length(0);
      const audit = await auditEntries(owner.organizationId, 'organization.security.set');
      // (One time on the fake clock: the entries' order is their ids'.)
      expect(audit.map((a) => [a.status, a.ip])).to.have.deep.members([
        [409, OFFICE],
        [409, '2001:db9::1'],
      ]);
    });

    it('takes the socket’s address without TRUST_PROXY: X-Forwarded-For is not believed', async () => {
      const owner = await createOrg(direct.deps, { plan: 'enterprise' });
      const member = await createUser(direct.deps, owner.organizationId);
      // The caller is 127.0.0.1 whatever it claims: a list without it would shut it out.
      const claimed = await call('PUT', '/organization/security', owner.token, {
        body: { allowed_ip_ranges: ['203.0.113.0/24'] },
        ip: OFFICE,
        server: direct,
      });
      expect(claimed.status, claimed.text).to.equal(409);
      const set = await call('PUT', '/organization/security', owner.token, {
        body: { allowed_ip_ranges: ['127.0.0.0/8'] },
        server: direct,
      });
      expect(set.status, set.text).to.equal(200);
      // Claiming an address outside the list changes nothing either.
      const res = await call('GET', '/vpn/connections', member.token, { ip: '198.51.100.7', server: direct });
      expect(res.status, res.text).to.equal(200);
    });

    it('leaves other organizations alone', async () => {
      const owner = await enterprise();
      expect((await put(owner.token, { allowed_ip_ranges: RANGES }, OFFICE)).status).to.equal(200);
      const other = await enterprise();
      const otherMember = await createUser(s.deps, other.organizationId);
      const res = await call('GET', '/vpn/connections', otherMember.token, { ip: '198.51.100.7' });
      expect(res.status, res.text).to.equal(200);
    });
  });

  describe('session_max_age (SESSION_MAX_AGE=3h on this server, a fake clock)', () => {
    const refresh = (refreshToken: string) =>
      call('POST', '/auth/refresh', undefined, { body: { refresh_token: refreshToken } });
    const sessions = (token: string) => call('GET', '/auth/sessions', token);
    const login = async (user: TestUser) => {
      const res = await call('POST', '/auth/login', undefined, {
        body: { email: user.email, password: user.password },
      });
      expect(res.status, res.text).to.equal(200);
      return res.body as { token: string; refresh_token: string };
    };

    it('refuses at refresh a session older than it, as an expired one, and no longer lists it', async () => {
      const owner = await enterprise();
      const member = await createUser(s.deps, owner.organizationId);
      const signedInAt = clock.now();
      expect((await put(owner.token, { session_max_age: 2 * 3_600 })).status).to.equal(200);

      // Listed with the policy's end, earlier than the server's 3 hours.
      const listed = await sessions(member.token);
      expect(listed.status, listed.text).to.equal(200);
      expect(listed.body.sessions).to.have.length(1);
      expect(listed.body.sessions[0].expires_at).to.equal(
        new Date(signedInAt.getTime() + 2 * HOUR).toISOString(),
      );

      // Within the bound the refresh works, and the new end stays at the bound.
      clock.advance(HOUR);
      const first = await refresh(member.refreshToken);
      expect(first.status, first.text).to.equal(200);
      clock.advance(HOUR + 1_000);
      const late = await refresh(first.body.refresh_token as string);
      expect(late.status, late.text).to.equal(401);
      expect(late.body.error.code).to.equal('INVALID_CREDENTIALS');
      // Its access token (an hour old) is refused too, as for a session past the server's bound.
      expect((await call('GET', '/auth/me', first.body.token as string)).status).to.equal(401);

      const fresh = await login(member);
      const now = await sessions(fresh.token);
      expect(now.body.sessions.map((x: { current: boolean }) => x.current)).to.deep.equal([true]);

      // Other organizations' sessions keep the server's bound.
      const other = await enterprise();
      clock.advance(2 * HOUR + 1_000);
      expect((await refresh(other.refreshToken)).status).to.equal(200);
    });

    it('is bounded by the server’s SESSION_MAX_AGE when that is smaller, and null gives it back', async () => {
      const owner = await enterprise();
      const member = await createUser(s.deps, owner.organizationId);
      expect((await put(owner.token, { session_max_age: 86_400 })).status).to.equal(200);
      const listed = await sessions(member.token);
      const created = new Date(listed.body.sessions[0].created_at as string).getTime();
      expect(listed.body.sessions[0].expires_at).to.equal(new Date(created + 3 * HOUR).toISOString());
      clock.advance(3 * HOUR + 1_000);
      expect((await refresh(member.refreshToken)).status).to.equal(401);

      // A bound of 2 hours ends a session at 2 hours; lifting it (null) lets the next one live the server's 3.
      const again = await login(member);
      expect(
        (
          await call('PUT', '/organization/security', (await login(owner)).token, {
            body: { session_max_age: 7_200 },
          })
        ).status,
      ).to.equal(200);
      clock.advance(2 * HOUR + 1_000);
      expect((await refresh(again.refresh_token)).status).to.equal(401);
      const third = await login(member);
      const ownerToken = (await login(owner)).token;
      expect(
        (await call('PUT', '/organization/security', ownerToken, { body: { session_max_age: null } })).status,
      ).to.equal(200);
      clock.advance(2 * HOUR + 1_000);
      const refreshed = await refresh(third.refresh_token);
      expect(refreshed.status, refreshed.text).to.equal(200);
    });
  });
});
