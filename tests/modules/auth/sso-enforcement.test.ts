// Test tier: server
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import { throttleKey } from '../../../server/access/login-throttle.js';
import { Organization } from '../../../server/access/organization.entity.js';
import { encryptSecret } from '../../../server/lib/crypto.js';
import { newId } from '../../../server/lib/ids.js';
import type { PlanId } from '../../../server/lib/plans.js';
import { MemoryMailDriver } from '../../../server/mail/mail-driver.js';
import { createOrganizationWithOwner } from '../../../server/modules/auth/auth.service.js';
import {
  createPasswordResetToken,
  sendPasswordReset,
} from '../../../server/modules/auth/password-reset-mail.js';
import { authRepositoryOf } from '../../../server/modules/auth/auth.repository.js';
import { ssoRepositoryOf } from '../../../server/modules/auth/sso.repository.js';
import { createUser, DEFAULT_PASSWORD, uniqueEmail, type TestUser } from '../../support/factories.js';
import { FakeClock } from '../../support/fake-clock.js';
import { http } from '../../support/http.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';

/**
 * docs/sso.md, "Enforced sign-in": with `enforced: true`, password login, password reset and two-factor set-up are
 * refused to the organization's users (403 `SSO_REQUIRED`) but the owner, whose password login is audited as
 * `auth.sso_break_glass`; API keys keep working.
 */
describe('enforced single sign-on (docs/sso.md, "Enforced sign-in")', function () {
  this.timeout(60_000);
  let s: TestServer;
  const clock = new FakeClock('2026-12-07T09:00:00.000Z');
  const outbox = new MemoryMailDriver();
  // On PostgreSQL a database of its own: reset mails are sent by a job, which another test server on the run's
  // database (with another mail driver) could otherwise take.
  let scratch: ScratchDatabase | undefined;
  before(async () => {
    scratch = await ownPostgresDatabase('sso_enforcement');
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

  interface Enterprise {
    domain: string;
    owner: TestUser;
    /** A member whose address is of the verified domain. */
    member: TestUser;
    /** An admin whose address is of no domain of the organization (refused only after a right password). */
    outsider: TestUser;
  }

  const login = (email: string, password: string) =>
    http(s.baseUrl, 'POST', '/v1/auth/login', { body: { email, password } });

  /** A user of `organizationId` with `email` and the default password, logged in (before any enforcement). */
  async function userWithEmail(organizationId: string, email: string, role: 'admin' | 'member') {
    const made = await createUser(s.deps, organizationId, { role });
    await s.deps.db.orm.em.fork().execute('update users set email = ? where id = ?', [email, made.id]);
    return { ...made, email };
  }

  /**
   * An Enterprise organization whose owner and one member have addresses of a domain it verified, with an OIDC
   * connection (`enforced` as given), seeded through the repository.
   */
  async function enterprise(opts: { enforced?: boolean; plan?: PlanId } = {}): Promise<Enterprise> {
    const domain = `acme-${randomBytes(5).toString('hex')}.test`;
    const em = s.deps.db.orm.em.fork();
    const ownerEmail = `owner@${domain}`;
    const created = await createOrganizationWithOwner(s.deps, em, {
      email: ownerEmail,
      password: DEFAULT_PASSWORD,
      name: 'Ada Owner',
      organizationName: 'Acme',
    });
    const organizationId = created.organization.id;
    await em.nativeUpdate(Organization, { id: organizationId }, { plan: opts.plan ?? 'enterprise' });
    // The owner's tokens, from a login before enforcement.
    const ownerLogin = await login(ownerEmail, DEFAULT_PASSWORD);
    expect(ownerLogin.status, ownerLogin.text).to.equal(200);
    const owner: TestUser = {
      id: created.id,
      email: ownerEmail,
      password: DEFAULT_PASSWORD,
      organizationId,
      role: 'owner',
      token: ownerLogin.body.token,
      refreshToken: ownerLogin.body.refresh_token,
    };
    const member = await userWithEmail(organizationId, `grace@${domain}`, 'member');
    const outsider = await createUser(s.deps, organizationId, { role: 'admin' });

    const sso = ssoRepositoryOf(s.deps);
    const now = s.deps.clock.now();
    await sso.transaction(s.deps.db.orm.em.fork(), async (tx) => {
      sso.createConnection(tx, {
        id: newId('sso'),
        now,
        organizationId,
        protocol: 'oidc',
        issuer: `https://idp.${domain}`,
        clientId: 'platform',
        clientSecret: encryptSecret(s.deps.keys.secrets, 'client-secret'),
        idpEntityId: null,
        idpSsoUrl: null,
        idpCertificate: null,
        defaultRole: 'member',
        enforced: opts.enforced ?? true,
      });
      await tx.flush();
      await sso.replaceDomains(tx, organizationId, [domain], now, () => randomBytes(16).toString('hex'));
      expect(await sso.markDomainVerified(tx, organizationId, domain, now)).to.equal(true);
    });
    return { domain, owner, member, outsider };
  }

  /** Turns enforcement on or off through the repository. */
  async function setEnforced(org: Enterprise, enforced: boolean): Promise<void> {
    const sso = ssoRepositoryOf(s.deps);
    await sso.transaction(s.deps.db.orm.em.fork(), async (tx) => {
      const connection = await sso.findConnection(tx, org.owner.organizationId, { lock: true });
      connection!.enforced = enforced;
      sso.saveConnection(tx, connection!);
    });
  }

  /** The §3 envelope of 403 SSO_REQUIRED, naming the way in. */
  function expectSsoRequired(res: { status: number; body: any; text: string; headers: Headers }) {
    expect(res.status, res.text).to.equal(403);
    expect(res.body.success).to.equal(false);
    expect(res.body.error.code).to.equal('SSO_REQUIRED');
    expect(res.body.error.message).to.contain('POST /v1/auth/sso/start');
    expect(res.body.error.request_id).to.equal(res.headers.get('x-request-id'));
  }

  /** The organization's audit entries (action, actor, status), by id. */
  async function auditEntries(organizationId: string) {
    const rows = await s.deps.db.orm.em
      .fork()
      .execute<{ id: string; action: string; actor_id: string; status: number }[]>(
        'select id, action, actor_id, status from audit_logs where organization_id = ?',
        [organizationId],
      );
    return new Map(rows.map(({ id, ...entry }) => [id, entry]));
  }
  const auditActions = async (organizationId: string) => [...(await auditEntries(organizationId)).values()];
  /** The entries written since `before` (the organization's entries then). */
  const auditSince = async (organizationId: string, before: Map<string, unknown>) =>
    [...(await auditEntries(organizationId)).entries()].filter(([id]) => !before.has(id)).map(([, e]) => e);

  describe('password login', () => {
    it('refuses an address of the verified domain before any password check: right, wrong or no account', async () => {
      const org = await enterprise();
      expectSsoRequired(await login(org.member.email, DEFAULT_PASSWORD));
      // Before the password check: a wrong password answers the same, and counts no failure.
      expectSsoRequired(await login(org.member.email, 'not-the-password'));
      expectSsoRequired(await login(org.member.email.toUpperCase(), DEFAULT_PASSWORD));
      // An address of the domain nobody has: the same answer as POST /auth/sso/start gives (it routes to the IdP).
      expectSsoRequired(await login(`nobody@${org.domain}`, DEFAULT_PASSWORD));
      // More refusals than the throttle's limit, and no throttle: they were not failed password checks.
      for (let i = 0; i < 10; i++) expectSsoRequired(await login(org.member.email, 'wrong'));
      const throttled = await s.deps.db.orm.em
        .fork()
        .execute<{ n: string | number }[]>('select count(*) as n from login_throttles where key = ?', [
          throttleKey(org.member.email, '127.0.0.1'),
        ]);
      expect(Number(throttled[0]!.n)).to.equal(0);
    });

    it('refuses any other user of the organization only after a right password: a wrong one is still 401', async () => {
      const org = await enterprise();
      const wrong = await login(org.outsider.email, 'not-the-password');
      expect(wrong.status, wrong.text).to.equal(401);
      expect(wrong.body.error.code).to.equal('INVALID_CREDENTIALS');
      expectSsoRequired(await login(org.outsider.email, DEFAULT_PASSWORD));
      // An unknown address outside the domains: the usual 401.
      const unknown = await login(uniqueEmail('nobody'), DEFAULT_PASSWORD);
      expect(unknown.status, unknown.text).to.equal(401);
      expect(unknown.body.error.code).to.equal('INVALID_CREDENTIALS');
      // The refused login is in the audit log as a refusal, with the user who gave the right password.
      const entries = await auditActions(org.owner.organizationId);
      expect(entries).to.deep.include({ action: 'auth.login', actor_id: org.outsider.id, status: 403 });
    });

    it('lets the owner in with the password and audits it as auth.sso_break_glass', async () => {
      const org = await enterprise();
      const wrong = await login(org.owner.email, 'not-the-password');
      expect(wrong.status, wrong.text).to.equal(401);
      const before = await auditEntries(org.owner.organizationId);
      const res = await login(org.owner.email, DEFAULT_PASSWORD);
      expect(res.status, res.text).to.equal(200);
      expect(res.body.token).to.be.a('string');
      const me = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: res.body.token });
      expect(me.status).to.equal(200);
      const added = await auditSince(org.owner.organizationId, before);
      expect(added).to.deep.include({ action: 'auth.sso_break_glass', actor_id: org.owner.id, status: 200 });
      expect(added).to.deep.include({ action: 'auth.login', actor_id: org.owner.id, status: 200 });
    });

    it('audits the break-glass of an owner with two-factor on when the code completes it', async () => {
      const org = await enterprise({ enforced: false });
      const setup = await http(s.baseUrl, 'POST', '/v1/auth/2fa/setup', { token: org.owner.token, body: {} });
      expect(setup.status, setup.text).to.equal(200);
      const authenticator = URI.parse(setup.body.otpauth_url) as TOTP;
      const code = () => authenticator.generate({ timestamp: clock.now().getTime() });
      const enabled = await http(s.baseUrl, 'POST', '/v1/auth/2fa/enable', {
        token: org.owner.token,
        body: { password: DEFAULT_PASSWORD, code: code() },
      });
      expect(enabled.status, enabled.text).to.equal(200);
      await setEnforced(org, true);
      clock.advance(30_000);

      const before = await auditEntries(org.owner.organizationId);
      const challenge = await login(org.owner.email, DEFAULT_PASSWORD);
      expect(challenge.status, challenge.text).to.equal(200);
      expect(challenge.body.two_factor_required).to.equal(true);
      expect((await auditSince(org.owner.organizationId, before)).map((e) => e.action)).not.to.include(
        'auth.sso_break_glass',
      );
      const verified = await http(s.baseUrl, 'POST', '/v1/auth/2fa/verify', {
        body: { challenge_token: challenge.body.challenge_token, code: code() },
      });
      expect(verified.status, verified.text).to.equal(200);
      const added = await auditSince(org.owner.organizationId, before);
      expect(added).to.deep.include({ action: 'auth.sso_break_glass', actor_id: org.owner.id, status: 200 });
    });

    it('changes nothing while the connection is not enforced, or when the plan no longer includes SSO', async () => {
      const relaxed = await enterprise({ enforced: false });
      expect((await login(relaxed.member.email, DEFAULT_PASSWORD)).status).to.equal(200);
      expect((await login(relaxed.outsider.email, DEFAULT_PASSWORD)).status).to.equal(200);
      const ownerIn = await login(relaxed.owner.email, DEFAULT_PASSWORD);
      expect(ownerIn.status).to.equal(200);
      const actions = (await auditActions(relaxed.owner.organizationId)).map((e) => e.action);
      expect(actions).not.to.include('auth.sso_break_glass');

      const downgraded = await enterprise({ plan: 'pro' });
      expect((await login(downgraded.member.email, DEFAULT_PASSWORD)).status).to.equal(200);
      expect((await login(downgraded.outsider.email, DEFAULT_PASSWORD)).status).to.equal(200);
    });
  });

  it('keeps API keys working for a refused user', async () => {
    const org = await enterprise({ enforced: false });
    const created = await http(s.baseUrl, 'POST', '/v1/api-keys', {
      token: org.outsider.token,
      body: { name: 'ci', permissions: ['vpn:read'] },
    });
    expect(created.status, created.text).to.equal(201);
    // Enforcement turned on afterwards.
    await setEnforced(org, true);
    expectSsoRequired(await login(org.outsider.email, DEFAULT_PASSWORD));
    const listed = await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: created.body.secret });
    expect(listed.status, listed.text).to.equal(200);
  });

  describe('password reset', () => {
    it('answers a reset request 202 as for anyone, and mails nothing to a refused user', async () => {
      const org = await enterprise();
      const refused = await http(s.baseUrl, 'POST', '/v1/auth/password-reset', {
        body: { email: org.outsider.email },
      });
      const unknown = await http(s.baseUrl, 'POST', '/v1/auth/password-reset', {
        body: { email: uniqueEmail('nobody') },
      });
      expect(refused.status).to.equal(202);
      expect(refused.body).to.deep.equal(unknown.body);
      // The owner's request is mailed; the job of the refused one ran by then or runs now, and sends nothing.
      expect(
        (await http(s.baseUrl, 'POST', '/v1/auth/password-reset', { body: { email: org.owner.email } }))
          .status,
      ).to.equal(202);
      await waitFor('the owner’s reset mail', () => outbox.sent.find((m) => m.to === org.owner.email), {
        timeoutMs: 10_000,
      });
      for (const user of [org.outsider, org.member]) await sendPasswordReset(s.deps, user.email);
      expect(
        outbox.sent.filter((m) => m.to === org.outsider.email || m.to === org.member.email),
      ).to.deep.equal([]);
      const tokens = await s.deps.db.orm.em
        .fork()
        .execute<{ n: string | number }[]>(
          'select count(*) as n from password_reset_tokens where user_id in (?, ?)',
          [org.outsider.id, org.member.id],
        );
      expect(Number(tokens[0]!.n)).to.equal(0);
    });

    it('refuses to set a password with a reset token of a refused user (one made before enforcement)', async () => {
      const org = await enterprise({ enforced: false });
      const em = s.deps.db.orm.em.fork();
      const user = await authRepositoryOf(s.deps).userWithOrganization(em, org.outsider.id);
      const token = createPasswordResetToken(s.deps, em, user, s.deps.clock.now(), 30 * 60_000);
      await em.flush();
      await setEnforced(org, true);
      const res = await http(s.baseUrl, 'POST', '/v1/auth/password-reset/confirm', {
        body: { token, new_password: 'a-new-password-1234' },
      });
      expectSsoRequired(res);
      // The password did not change.
      expectSsoRequired(await login(org.outsider.email, DEFAULT_PASSWORD));
      expect((await login(org.outsider.email, 'a-new-password-1234')).status).to.equal(401);
    });
  });

  describe('two-factor set-up', () => {
    it('is refused to a user of the organization, not to its owner', async () => {
      const org = await enterprise();
      for (const user of [org.member, org.outsider]) {
        expectSsoRequired(
          await http(s.baseUrl, 'POST', '/v1/auth/2fa/setup', { token: user.token, body: {} }),
        );
        expectSsoRequired(
          await http(s.baseUrl, 'POST', '/v1/auth/2fa/enable', {
            token: user.token,
            body: { password: DEFAULT_PASSWORD, code: '123456' },
          }),
        );
      }
      const owner = await http(s.baseUrl, 'POST', '/v1/auth/2fa/setup', { token: org.owner.token, body: {} });
      expect(owner.status, owner.text).to.equal(200);
      expect(owner.body.secret).to.be.a('string');
    });
  });
});
