// Test tier: server
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Organization } from '../../../server/access/organization.entity.js';
import { User } from '../../../server/access/user.entity.js';
import { Event } from '../../../server/events/event.entity.js';
import { forgetDiscoveredIssuers } from '../../../server/modules/auth/sso-oidc.js';
import { startDnsServer, type TestDnsServer } from '../../support/dns-server.js';
import { testConfig } from '../../support/env.js';
import { createOrg, createUser, type TestUser } from '../../support/factories.js';
import { FakeClock } from '../../support/fake-clock.js';
import { http } from '../../support/http.js';
import { startOidcProvider, type SignInResult, type TestOidcProvider } from '../../support/oidc-provider.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/**
 * Single sign-on through OpenID Connect from end to end (docs/sso.md, "Signing in"): an Enterprise organization
 * configures its connection with PUT /v1/organization/sso and verifies its domain by a TXT record of the test's DNS
 * server; a real provider (oidc-provider, on loopback) signs people in; the browser is played over HTTP. Every refusal
 * answers its documented code and creates nothing (no user, no code, no event).
 */

const PUBLIC_BASE_URL = 'https://api.sso-oidc.example.test';
const CALLBACK = `${PUBLIC_BASE_URL}/v1/auth/sso/oidc/callback`;
/** A command-line client's listener (never requested: the test reads the API's redirect to it). */
const RETURN_TO = 'http://127.0.0.1:45123/sso/done';
const LOGIN_FIELDS = ['success', 'token', 'refresh_token', 'token_type', 'expires_in', 'user'];

const uniqueDomain = (label: string) => `${label}-${randomBytes(4).toString('hex')}.example`;

interface Organization_ {
  owner: TestUser;
  domain: string;
}

describe('SSO through OpenID Connect, end to end (docs/sso.md)', function () {
  this.timeout(60_000);
  let s: TestServer;
  let dns: TestDnsServer;
  let idp: TestOidcProvider;
  const clock = new FakeClock(new Date());

  before(async () => {
    dns = await startDnsServer();
    idp = await startOidcProvider({ redirectUris: [CALLBACK] });
    s = await startTestServer({ env: { DNS_SERVERS: dns.address, PUBLIC_BASE_URL }, clock });
  });
  after(async () => {
    await s?.close();
    await idp?.close();
    await dns?.close();
  });
  afterEach(() => {
    idp.onIdToken = undefined;
  });

  const api = (method: string, path: string, opts: { token?: string; body?: unknown } = {}) =>
    http(s.baseUrl, method, `/v1${path}`, opts);

  /** An Enterprise organization whose OIDC connection uses `client` and whose domain is verified. */
  async function configured(
    opts: { client?: 'main' | 'other'; defaultRole?: string; pendingDomain?: string } = {},
  ): Promise<Organization_> {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const domain = uniqueDomain('oidc');
    const client = opts.client === 'other' ? idp.otherClient : idp.client;
    const put = await api('PUT', '/organization/sso', {
      token: owner.token,
      body: {
        protocol: 'oidc',
        issuer: idp.issuer,
        client_id: client.clientId,
        client_secret: client.clientSecret,
        domains: opts.pendingDomain ? [domain, opts.pendingDomain] : [domain],
        ...(opts.defaultRole ? { default_role: opts.defaultRole } : {}),
      },
    });
    expect(put.status, put.text).to.equal(200);
    const entry = (
      put.body.sso.domains as { domain: string; verification: { record: { name: string; value: string } } }[]
    ).find((d) => d.domain === domain)!;
    dns.txt.set(entry.verification.record.name, [entry.verification.record.value]);
    const verified = await api('POST', `/organization/sso/domains/${domain}/verify`, { token: owner.token });
    expect(verified.status, verified.text).to.equal(200);
    return { owner, domain };
  }

  /** POST /auth/sso/start: the provider's address. */
  async function start(email: string, returnTo: string | null = RETURN_TO): Promise<string> {
    const res = await api('POST', '/auth/sso/start', {
      body: { email, ...(returnTo ? { return_to: returnTo } : {}) },
    });
    expect(res.status, res.text).to.equal(200);
    expect(Object.keys(res.body)).to.have.members(['success', 'authorization_url']);
    return res.body.authorization_url as string;
  }

  /** A person of the provider with these claims signs in through the API, which answers `return_to?...`. */
  async function signIn(
    startEmail: string,
    claims: { email?: string; email_verified?: unknown; name?: string; sub?: string },
  ): Promise<SignInResult & { params: URLSearchParams }> {
    const account = idp.addAccount(claims);
    const result = await idp.signIn(await start(startEmail), account, { apiBaseUrl: s.baseUrl });
    expect(result.status, result.body).to.equal(302);
    expect(result.location!.startsWith(`${RETURN_TO}?`), result.location!).to.equal(true);
    return { ...result, params: new URL(result.location!).searchParams };
  }

  async function expectRefused(
    result: SignInResult & { params?: URLSearchParams },
    code: string,
    description?: RegExp,
  ) {
    const params = result.params ?? new URL(result.location!).searchParams;
    expect(params.get('code'), 'no code').to.equal(null);
    expect(params.get('error'), params.get('error_description') ?? '').to.equal(code);
    if (description) expect(params.get('error_description')).to.match(description);
  }

  /** What a sign-in may create in the organization, to compare before and after a refusal. */
  async function footprint(organizationId: string) {
    const em = s.deps.db.orm.em.fork();
    const [codes] = await em.execute<{ n: string }[]>(
      'select count(*)::int as n from sso_codes where organization_id = ?',
      [organizationId],
    );
    return {
      users: (await em.find(User, { organization: organizationId }, { orderBy: { id: 'asc' } })).map(
        (u) => u.email,
      ),
      codes: Number(codes!.n),
      events: (await em.find(Event, { organizationId }, { orderBy: { seq: 'asc' } })).map((e) => e.type),
    };
  }

  async function auditActions(organizationId: string): Promise<string[]> {
    const rows = await s.deps.db.orm.em
      .fork()
      .execute<{ action: string }[]>(
        'select action from audit_logs where organization_id = ? order by created_at, id',
        [organizationId],
      );
    return rows.map((r) => r.action);
  }

  describe('a first sign-in', () => {
    it('creates the user just in time with the default role, and its code opens a session like /auth/login', async () => {
      const { owner, domain } = await configured({ defaultRole: 'admin' });
      const email = `ada@${domain}`;
      const before = await footprint(owner.organizationId);

      const result = await signIn(email, {
        email: `Ada@${domain.toUpperCase()}`,
        email_verified: true,
        name: 'Ada L.',
      });
      const code = result.params.get('code')!;
      expect(code).to.match(/^ssoc_/);
      expect([...result.params.keys()]).to.deep.equal(['code']);

      const em = s.deps.db.orm.em.fork();
      const user = await em.findOneOrFail(User, { email }, { populate: ['passwordHash'] });
      expect(user.organization.id).to.equal(owner.organizationId);
      expect(user).to.include({ role: 'admin', status: 'active', name: 'Ada L.' });
      expect(user.passwordHash).to.equal(null);
      const after = await footprint(owner.organizationId);
      expect(after.users).to.have.length(before.users.length + 1);
      expect(after.events.slice(before.events.length)).to.deep.equal(['user.created']);
      const created = await em.findOneOrFail(
        Event,
        { organizationId: owner.organizationId, type: 'user.created' },
        { orderBy: { seq: 'desc' } },
      );
      expect(created.data.object).to.deep.include({ id: user.id, email, role: 'admin' });
      expect(await auditActions(owner.organizationId)).to.include('auth.sso_user_created');
      // The entry names the browser's request that came back from the IdP: its address and id.
      const [entry] = await em.execute<{ ip: string | null; request_id: string | null }[]>(
        `select ip, request_id from audit_logs where organization_id = ? and action = 'auth.sso_user_created'`,
        [owner.organizationId],
      );
      expect(entry?.ip).to.equal('127.0.0.1');
      expect(entry?.request_id).to.match(/^req_/);

      const token = await api('POST', '/auth/sso/token', { body: { code } });
      expect(token.status, token.text).to.equal(200);
      expect(Object.keys(token.body)).to.have.members(LOGIN_FIELDS);
      expect(token.body).to.include({ success: true, token_type: 'Bearer', expires_in: 3600 });
      expect(token.body.user).to.include({ id: user.id, email, role: 'admin' });
      const me = await api('GET', '/auth/me', { token: token.body.token });
      expect(me.status, me.text).to.equal(200);
      expect(me.body.user).to.include({ id: user.id, email });
      const [session] = await em.execute<{ method: string }[]>(
        'select method from login_sessions where user_id = ? order by created_at desc limit 1',
        [user.id],
      );
      expect(session!.method).to.equal('sso');
      expect((await footprint(owner.organizationId)).events.slice(-1)).to.deep.equal(['user.login']);

      // The code works once.
      const again = await api('POST', '/auth/sso/token', { body: { code } });
      expect(again.status, again.text).to.equal(401);
      expect(again.body.error.code).to.equal('INVALID_CREDENTIALS');
    });

    it('shows the code on a page when the sign-in has no return_to', async () => {
      const { domain } = await configured();
      const account = idp.addAccount({ email: `page@${domain}`, email_verified: true });
      const result = await idp.signIn(await start(`page@${domain}`, null), account, {
        apiBaseUrl: s.baseUrl,
      });
      expect(result.status, result.body).to.equal(200);
      const code = /ssoc_[A-Za-z0-9_-]+/.exec(result.body)?.[0];
      expect(code, result.body).to.be.a('string');
      const token = await api('POST', '/auth/sso/token', { body: { code } });
      expect(token.status, token.text).to.equal(200);
    });

    it('finds the same user on a second sign-in (no second user, no second user.created)', async () => {
      const { owner, domain } = await configured();
      const email = `grace@${domain}`;
      const first = await signIn(email, { email, email_verified: true, sub: `grace-${domain}` });
      const t1 = await api('POST', '/auth/sso/token', { body: { code: first.params.get('code') } });
      const middle = await footprint(owner.organizationId);
      const second = await signIn(email, { email, email_verified: true, sub: `grace-${domain}` });
      const t2 = await api('POST', '/auth/sso/token', { body: { code: second.params.get('code') } });
      expect(t2.status, t2.text).to.equal(200);
      expect(t2.body.user.id).to.equal(t1.body.user.id);
      const after = await footprint(owner.organizationId);
      expect(after.users).to.deep.equal(middle.users);
      expect(after.events.filter((e) => e === 'user.created')).to.have.length(
        middle.events.filter((e) => e === 'user.created').length,
      );
    });

    it('activates an invited user of the organization, with the role of the invitation', async () => {
      const { owner, domain } = await configured();
      const invited = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const email = `invited@${domain}`;
      await s.deps.db.orm.em.fork().nativeUpdate(User, { id: invited.id }, { email, status: 'invited' });
      const result = await signIn(email, { email, email_verified: true });
      const token = await api('POST', '/auth/sso/token', { body: { code: result.params.get('code') } });
      expect(token.status, token.text).to.equal(200);
      expect(token.body.user).to.include({ id: invited.id, role: 'admin' });
      const user = await s.deps.db.orm.em.fork().findOneOrFail(User, { id: invited.id });
      expect(user.status).to.equal('active');
    });

    it('signs in an existing user of the organization with its own role', async () => {
      const { owner, domain } = await configured();
      const existing = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const email = `existing@${domain}`;
      await s.deps.db.orm.em.fork().nativeUpdate(User, { id: existing.id }, { email });
      const result = await signIn(email, { email, email_verified: true });
      const token = await api('POST', '/auth/sso/token', { body: { code: result.params.get('code') } });
      expect(token.status, token.text).to.equal(200);
      expect(token.body.user).to.include({ id: existing.id, role: 'admin' });
    });
  });

  describe('refusals: the documented code, and nothing created', () => {
    /** Signs in with the ID token changed by `change`; expects `code` and an unchanged organization. */
    async function refusedWith(
      code: string,
      setup: (o: Organization_) => Promise<{ startEmail: string; claims: Record<string, unknown> }>,
      change?: (idToken: string) => string,
      description?: RegExp,
    ) {
      const org = await configured();
      const { startEmail, claims } = await setup(org);
      const before = await footprint(org.owner.organizationId);
      idp.onIdToken = change;
      const result = await signIn(startEmail, claims);
      await expectRefused(result, code, description);
      expect(await footprint(org.owner.organizationId)).to.deep.equal(before);
    }
    const person = async ({ domain }: Organization_) => ({
      startEmail: `p@${domain}`,
      claims: { email: `p@${domain}`, email_verified: true },
    });

    it('an ID token with another nonce: SSO_ASSERTION_INVALID', async () => {
      await refusedWith(
        'SSO_ASSERTION_INVALID',
        person,
        (t) => idp.resign(t, { nonce: 'another-nonce' }),
        /nonce/,
      );
    });

    it('an ID token changed after it was signed: SSO_ASSERTION_INVALID', async () => {
      await refusedWith('SSO_ASSERTION_INVALID', person, (t) =>
        idp.tamper(t, { email: 'mallory@evil.example' }),
      );
    });

    it('an ID token signed by a key that is not in the issuer’s JWKS: SSO_ASSERTION_INVALID', async () => {
      await refusedWith('SSO_ASSERTION_INVALID', person, (t) => idp.resign(t, {}, { key: 'foreign' }));
    });

    it('an ID token for another client of the provider (aud): SSO_ASSERTION_INVALID', async () => {
      await refusedWith(
        'SSO_ASSERTION_INVALID',
        person,
        (t) => idp.resign(t, { aud: idp.otherClient.clientId, azp: idp.otherClient.clientId }),
        /audience/,
      );
    });

    it('an expired ID token: SSO_ASSERTION_INVALID', async () => {
      const past = Math.floor(Date.now() / 1000) - 3600;
      await refusedWith(
        'SSO_ASSERTION_INVALID',
        person,
        (t) => idp.resign(t, { iat: past - 60, exp: past }),
        /expired/,
      );
    });

    it('an email the provider has not verified: SSO_EMAIL_NOT_VERIFIED', async () => {
      await refusedWith('SSO_EMAIL_NOT_VERIFIED', async ({ domain }) => ({
        startEmail: `u@${domain}`,
        claims: { email: `u@${domain}`, email_verified: false },
      }));
    });

    it('an email of a domain the organization has not verified: SSO_DOMAIN_NOT_ALLOWED', async () => {
      const pending = uniqueDomain('pending');
      const org = await configured({ pendingDomain: pending });
      const before = await footprint(org.owner.organizationId);
      const result = await signIn(`x@${org.domain}`, { email: `x@${pending}`, email_verified: true });
      await expectRefused(result, 'SSO_DOMAIN_NOT_ALLOWED');
      expect(await footprint(org.owner.organizationId)).to.deep.equal(before);
      // Nor can a pending domain start a sign-in.
      const res = await api('POST', '/auth/sso/start', { body: { email: `x@${pending}` } });
      expect(res.status, res.text).to.equal(404);
    });

    it('a suspended user: SSO_USER_DISABLED', async () => {
      await refusedWith('SSO_USER_DISABLED', async ({ owner, domain }) => {
        const u = await createUser(s.deps, owner.organizationId);
        const email = `suspended@${domain}`;
        await s.deps.db.orm.em.fork().nativeUpdate(User, { id: u.id }, { email, status: 'suspended' });
        return { startEmail: email, claims: { email, email_verified: true } };
      });
    });

    it('a user the organization removed: SSO_USER_DISABLED', async () => {
      await refusedWith('SSO_USER_DISABLED', async ({ owner, domain }) => {
        const u = await createUser(s.deps, owner.organizationId);
        const email = `removed@${domain}`;
        await s.deps.db.orm.em.fork().nativeUpdate(User, { id: u.id }, { email, deletedAt: new Date() });
        return { startEmail: email, claims: { email, email_verified: true } };
      });
    });

    it('the person cancels at the provider (error=access_denied): SSO_IDP_ERROR', async () => {
      const org = await configured();
      const before = await footprint(org.owner.organizationId);
      const account = idp.addAccount({ email: `c@${org.domain}`, email_verified: true });
      const result = await idp.signIn(await start(`c@${org.domain}`), account, {
        apiBaseUrl: s.baseUrl,
        abort: true,
      });
      expect(result.status).to.equal(302);
      await expectRefused(result, 'SSO_IDP_ERROR', /access_denied/);
      expect(await footprint(org.owner.organizationId)).to.deep.equal(before);
    });

    it('an expired authorization code: SSO_IDP_ERROR', async () => {
      const org = await configured();
      const before = await footprint(org.owner.organizationId);
      const account = idp.addAccount({ email: `e@${org.domain}`, email_verified: true });
      const callback = await idp.authorize(await start(`e@${org.domain}`), account);
      idp.expireAuthorizationCodes();
      const result = await idp.followCallback(callback, s.baseUrl);
      expect(result.status).to.equal(302);
      await expectRefused(result, 'SSO_IDP_ERROR', /invalid_grant/);
      expect(await footprint(org.owner.organizationId)).to.deep.equal(before);
    });

    it('a state used already: SSO_STATE_INVALID (the callback works once)', async () => {
      const org = await configured();
      const email = `r@${org.domain}`;
      const account = idp.addAccount({ email, email_verified: true });
      const callback = await idp.authorize(await start(email), account);
      const first = await idp.followCallback(callback, s.baseUrl);
      expect(new URL(first.location!).searchParams.get('code')).to.match(/^ssoc_/);
      const middle = await footprint(org.owner.organizationId);
      const tokensBefore = idp.tokenRequests;
      const replay = await idp.followCallback(callback, s.baseUrl);
      // The sign-in is gone, and its return_to with it: a page, not a redirect.
      expect(replay.status).to.equal(400);
      expect(replay.body).to.include('SSO_STATE_INVALID');
      expect(idp.tokenRequests).to.equal(tokensBefore);
      expect(await footprint(org.owner.organizationId)).to.deep.equal(middle);
    });

    it('one state followed twice at once: one sign-in, the other SSO_STATE_INVALID', async () => {
      const org = await configured();
      const email = `race@${org.domain}`;
      const account = idp.addAccount({ email, email_verified: true });
      const callback = await idp.authorize(await start(email), account);
      const before = await footprint(org.owner.organizationId);
      const answers = await Promise.all([
        idp.followCallback(callback, s.baseUrl),
        idp.followCallback(callback, s.baseUrl),
      ]);
      const codes = answers.filter((a) => a.status === 302 && new URL(a.location!).searchParams.get('code'));
      const refused = answers.filter((a) => a.status === 400 && a.body.includes('SSO_STATE_INVALID'));
      expect(
        codes,
        answers.map((a) => `${a.status} ${a.location ?? a.body.slice(0, 80)}`).join(' | '),
      ).to.have.length(1);
      expect(refused).to.have.length(1);
      const after = await footprint(org.owner.organizationId);
      expect(after.codes).to.equal(before.codes + 1);
      expect(after.users).to.have.length(before.users.length + 1);
      expect(after.events.slice(before.events.length)).to.deep.equal(['user.created']);
    });

    it('a state older than 10 minutes: SSO_STATE_INVALID', async () => {
      const org = await configured();
      const before = await footprint(org.owner.organizationId);
      const email = `late@${org.domain}`;
      const account = idp.addAccount({ email, email_verified: true });
      const callback = await idp.authorize(await start(email), account);
      clock.advance(10 * 60_000 + 1000);
      const result = await idp.followCallback(callback, s.baseUrl);
      expect(result.status).to.equal(400);
      expect(result.body).to.include('SSO_STATE_INVALID');
      expect(await footprint(org.owner.organizationId)).to.deep.equal(before);
    });

    it('an unknown or missing state: SSO_STATE_INVALID, and the provider is not asked', async () => {
      const tokensBefore = idp.tokenRequests;
      for (const query of ['?code=abc&state=nope', '?code=abc', '?state=a&state=b&code=abc']) {
        const res = await fetch(`${s.baseUrl}/v1/auth/sso/oidc/callback${query}`, { redirect: 'manual' });
        expect(res.status, query).to.equal(400);
        expect(res.headers.get('content-type')).to.match(/^text\/html/);
        expect(await res.text()).to.include('SSO_STATE_INVALID');
      }
      expect(idp.tokenRequests).to.equal(tokensBefore);
    });
  });

  describe('two organizations', () => {
    it('routes each email to its own organization’s connection, and never signs in through another one', async () => {
      const a = await configured();
      const b = await configured({ client: 'other' });
      expect(new URL(await start(`x@${a.domain}`)).searchParams.get('client_id')).to.equal(
        idp.client.clientId,
      );
      expect(new URL(await start(`x@${b.domain}`)).searchParams.get('client_id')).to.equal(
        idp.otherClient.clientId,
      );

      // A sign-in started for B whose provider answers an address of A's domain: neither organization signs it in.
      const beforeA = await footprint(a.owner.organizationId);
      const beforeB = await footprint(b.owner.organizationId);
      const result = await signIn(`someone@${b.domain}`, {
        email: `victim@${a.domain}`,
        email_verified: true,
      });
      await expectRefused(result, 'SSO_DOMAIN_NOT_ALLOWED');
      expect(await footprint(a.owner.organizationId)).to.deep.equal(beforeA);
      expect(await footprint(b.owner.organizationId)).to.deep.equal(beforeB);
    });

    it('refuses an address that has an account in another organization: SSO_EMAIL_TAKEN', async () => {
      const a = await configured();
      const other = await createOrg(s.deps);
      const email = `taken@${a.domain}`;
      await s.deps.db.orm.em.fork().nativeUpdate(User, { id: other.id }, { email });
      const before = await footprint(a.owner.organizationId);
      const result = await signIn(email, { email, email_verified: true });
      await expectRefused(result, 'SSO_EMAIL_TAKEN');
      expect(await footprint(a.owner.organizationId)).to.deep.equal(before);
    });

    it('stops signing in when the organization leaves the Enterprise plan', async () => {
      const a = await configured();
      await s.deps.db.orm.em
        .fork()
        .nativeUpdate(Organization, { id: a.owner.organizationId }, { plan: 'pro' });
      const res = await api('POST', '/auth/sso/start', { body: { email: `x@${a.domain}` } });
      expect(res.status, res.text).to.equal(404);
    });
  });

  describe('the issuer’s address (SSRF)', () => {
    it('accepts an http:// loopback issuer only with the private-targets setting, never in production', async () => {
      const strict = await startTestServer({
        env: { DNS_SERVERS: dns.address, PUBLIC_BASE_URL, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' },
      });
      try {
        forgetDiscoveredIssuers();
        const owner = await createOrg(strict.deps, { plan: 'enterprise' });
        for (const issuer of [idp.issuer, idp.issuer.replace('http:', 'https:'), 'https://169.254.169.254']) {
          const res = await http(strict.baseUrl, 'PUT', '/v1/organization/sso', {
            token: owner.token,
            body: {
              protocol: 'oidc',
              issuer,
              client_id: idp.client.clientId,
              client_secret: idp.client.clientSecret,
            },
          });
          expect(res.status, res.text).to.equal(400);
          expect(res.body.error.code).to.equal('VALIDATION_ERROR');
          expect(res.body.error.details.map((d: { path: string }) => d.path)).to.deep.equal(['issuer']);
        }
        const stored = await strict.deps.db.orm.em
          .fork()
          .execute('select 1 from sso_connections where organization_id = ?', [owner.organizationId]);
        expect(stored).to.have.length(0);
      } finally {
        await strict.close();
      }
      expect(() => testConfig({ NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' })).to.throw(
        /WEBHOOK_ALLOW_PRIVATE_TARGETS/,
      );
    });
  });
});
