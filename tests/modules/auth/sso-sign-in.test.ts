// Test tier: server
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Organization } from '../../../server/access/organization.entity.js';
import { User } from '../../../server/access/user.entity.js';
import { ZLoginOutput } from '../../../server/modules/auth/auth.schema.js';
import { AppError } from '../../../server/lib/errors.js';
import { newId } from '../../../server/lib/ids.js';
import { sha256Hex } from '../../../server/lib/crypto.js';
import type { PlanId } from '../../../server/lib/plans.js';
import { SsoFailure, type SsoFailureCode } from '../../../server/modules/auth/sso-errors.js';
import type { SsoSignIn } from '../../../server/modules/auth/sso.entity.js';
import { ssoRepositoryOf } from '../../../server/modules/auth/sso.repository.js';
import {
  consumeSsoState,
  exchangeSsoCode,
  finishSignIn,
  purgeExpiredSso,
  startSso,
  type SsoAnswer,
  type SsoIdentity,
} from '../../../server/modules/auth/sso-sign-in.service.js';
import { createInProcessContext } from '../../../server/trpc/context.js';
import { login } from '../../../server/modules/auth/auth.service.js';
import { createOrg, createUser, DEFAULT_PASSWORD, signedIn, type TestUser } from '../../support/factories.js';
import { FakeClock } from '../../support/fake-clock.js';
import { ssoSignInSetUp, stateOf } from './sso-sign-in.fixtures.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/**
 * docs/sso.md, "Signing in": `POST /auth/sso/start` routes an email to the organization that verified its domain,
 * the IdP's answer (here a fake identity, as the OIDC callback and the SAML ACS hand it over once checked) finds or
 * makes the user and ends with a one-time code, and `POST /auth/sso/token` exchanges the code for the body of
 * `POST /auth/login`. Every refusal creates nothing.
 */
describe('single sign-on: start, the IdP’s identity, token (docs/sso.md, "Signing in")', function () {
  this.timeout(60_000);
  const clock = new FakeClock('2026-12-07T10:00:00.000Z');
  const APP_ORIGIN = 'https://app.example.test';
  let s: TestServer;

  before(async () => {
    s = await startTestServer({
      clock,
      env: { SSO_RETURN_ORIGINS: `${APP_ORIGIN},https://other.example.test` },
    });
  });
  after(async () => {
    await s?.close();
  });

  const ctx = () => createInProcessContext(s.deps);
  const loginAs = async (email: string, password: string) =>
    signedIn(await login(ctx(), { email, password }));
  const query = <T extends object>(sql: string, params: unknown[] = []) =>
    s.deps.db.orm.em.fork().execute<T[]>(sql, params);

  interface Enterprise {
    owner: TestUser;
    organizationId: string;
    domain: string;
  }

  /** An organization (Enterprise unless told) with a SAML connection and `domain`, verified unless told. */
  async function enterprise(
    opts: {
      plan?: PlanId;
      verified?: boolean;
      connection?: boolean;
      defaultRole?: 'admin' | 'member';
    } = {},
  ): Promise<Enterprise> {
    const owner = await createOrg(s.deps, { plan: opts.plan ?? 'enterprise' });
    const organizationId = owner.organizationId;
    const { domain } = await ssoSignInSetUp(s.deps, organizationId, opts);
    return { owner, organizationId, domain };
  }

  /** A started sign-in, used up as the callback or the ACS does with the state the IdP sent back. */
  async function signInOf(org: Enterprise, returnTo?: string): Promise<SsoSignIn> {
    const started = await startSso(ctx(), {
      email: `someone@${org.domain}`,
      ...(returnTo ? { return_to: returnTo } : {}),
    });
    return consumeSsoState(s.deps, stateOf(started.authorization_url));
  }

  const finish = async (org: Enterprise, identity: SsoIdentity, returnTo?: string) =>
    finishSignIn(s.deps, await signInOf(org, returnTo), identity);

  /** The code shown on the page of a sign-in without `return_to`. */
  function codeOfPage(answer: SsoAnswer): string {
    expect(answer.status, answer.body).to.equal(200);
    expect(answer.contentType).to.match(/^text\/html/);
    const code = /<code>(ssoc_[A-Za-z0-9_-]+)<\/code>/.exec(answer.body)?.[1];
    expect(code, answer.body).to.be.a('string');
    return code!;
  }

  function expectRefusalPage(answer: SsoAnswer, code: SsoFailureCode, status: number) {
    expect(answer.status, answer.body).to.equal(status);
    expect(answer.contentType).to.match(/^text\/html/);
    expect(answer.body).to.contain(`<code>${code}</code>`);
    expect(answer.body).not.to.match(/ssoc_/);
  }

  /** What a sign-in could have written for the organization: its users, codes, events and audit entries. */
  async function footprint(organizationId: string) {
    const [row] = await query<Record<string, string | number>>(
      `select
         (select count(*) from users where organization_id = ?) as users,
         (select count(*) from users where organization_id = ? and status = 'active') as active,
         (select count(*) from sso_codes where organization_id = ?) as codes,
         (select count(*) from events where organization_id = ?) as events,
         (select count(*) from audit_logs where organization_id = ?) as audit`,
      Array(5).fill(organizationId),
    );
    return Object.fromEntries(Object.entries(row!).map(([k, v]) => [k, Number(v)]));
  }

  async function expectAppError(p: Promise<unknown>, code: string): Promise<AppError> {
    try {
      await p;
    } catch (err) {
      expect(err, String(err)).to.be.instanceOf(AppError);
      expect((err as AppError).code).to.equal(code);
      return err as AppError;
    }
    expect.fail(`expected ${code}`);
  }

  async function expectSsoFailure(p: Promise<unknown>, code: SsoFailureCode): Promise<void> {
    try {
      await p;
    } catch (err) {
      expect(err, String(err)).to.be.instanceOf(SsoFailure);
      expect((err as SsoFailure).code).to.equal(code);
      return;
    }
    expect.fail(`expected ${code}`);
  }

  describe('POST /auth/sso/start', () => {
    it('answers the IdP’s address for an email of a verified domain, and keeps the sign-in hashed for 10 minutes', async () => {
      const org = await enterprise();
      const out = await startSso(ctx(), {
        email: `Grace@${org.domain.toUpperCase()}`,
        return_to: 'http://127.0.0.1:8976/callback',
      });
      expect(out.success).to.equal(true);
      const url = new URL(out.authorization_url);
      expect(`${url.origin}${url.pathname}`).to.equal(`https://idp.${org.domain}/sso`);
      expect(url.searchParams.get('SAMLRequest')).to.be.a('string');
      const state = url.searchParams.get('RelayState')!;
      expect(state).to.have.length.of.at.least(43);
      const rows = await query<{
        organization_id: string;
        protocol: string;
        return_to: string;
        request_id: string;
        expires_at: Date;
        used_at: Date | null;
      }>('select * from sso_sign_ins where state_hash = ?', [sha256Hex(state)]);
      expect(rows).to.have.length(1);
      expect(rows[0]!.organization_id).to.equal(org.organizationId);
      expect(rows[0]!.protocol).to.equal('saml');
      expect(rows[0]!.return_to).to.equal('http://127.0.0.1:8976/callback');
      expect(rows[0]!.request_id).to.match(/^_/);
      expect(new Date(rows[0]!.expires_at).getTime()).to.equal(clock.now().getTime() + 10 * 60_000);
      expect(rows[0]!.used_at).to.equal(null);
      // Nothing of the state itself is stored.
      expect(await query('select 1 from sso_sign_ins where state_hash = ?', [state])).to.have.length(0);
    });

    it('answers 404 with one body for an unknown domain, a pending one, no connection, and a plan below Enterprise', async () => {
      const pending = await enterprise({ verified: false });
      const noConnection = await enterprise({ connection: false });
      const pro = await enterprise({ plan: 'pro' });
      const bodies: string[] = [];
      for (const email of [
        `someone@unknown-${randomBytes(4).toString('hex')}.test`,
        `someone@${pending.domain}`,
        `someone@${noConnection.domain}`,
        `someone@${pro.domain}`,
      ]) {
        const err = await expectAppError(startSso(ctx(), { email }), 'NOT_FOUND');
        bodies.push(JSON.stringify({ code: err.code, message: err.message, details: err.details }));
      }
      expect(new Set(bodies).size, bodies.join('\n')).to.equal(1);
      for (const org of [pending, noConnection, pro]) {
        expect(
          await query('select 1 from sso_sign_ins where organization_id = ?', [org.organizationId]),
        ).to.have.length(0);
      }
    });

    it('takes return_to on loopback with a port or at an origin of SSO_RETURN_ORIGINS, and refuses anything else with 400', async () => {
      const org = await enterprise();
      const email = `someone@${org.domain}`;
      for (const returnTo of [
        'http://127.0.0.1:8976/callback',
        'http://[::1]:9000/cb?x=1',
        `${APP_ORIGIN}/sso/done`,
        'https://other.example.test/',
      ]) {
        const out = await startSso(ctx(), { email, return_to: returnTo });
        expect(out.authorization_url, returnTo).to.be.a('string');
      }
      for (const returnTo of [
        'https://evil.example.test/callback',
        'http://app.example.test/sso/done',
        'http://localhost:8976/callback',
        'https://127.0.0.1:8976/callback',
        'http://127.0.0.1/callback',
        'http://127.0.0.1:8976/callback#fragment',
        'http://user:secret@127.0.0.1:8976/callback',
        'not a url',
        'javascript:alert(1)',
      ]) {
        const err = await expectAppError(startSso(ctx(), { email, return_to: returnTo }), 'VALIDATION_ERROR');
        expect(err.details?.[0], returnTo).to.include({ path: 'return_to' });
      }
    });
  });

  describe('the IdP’s identity (finishSignIn, as the OIDC callback and the SAML ACS call it)', () => {
    it('makes an unknown address of the domain a user just in time: default_role, no password, user.created, audited', async () => {
      const org = await enterprise({ defaultRole: 'admin' });
      const email = `ada@${org.domain}`;
      const answer = await finish(org, { email: email.toUpperCase(), name: 'Ada <Lovelace>' });
      const code = codeOfPage(answer);
      expect(answer.headers['Cache-Control']).to.equal('no-store');
      // The IdP's name is shown nowhere unescaped; the page holds the code only.
      expect(answer.body).not.to.contain('<Lovelace>');

      const users = await query<{
        id: string;
        role: string;
        status: string;
        name: string;
        password_hash: string | null;
      }>('select id, role, status, name, password_hash from users where email = ?', [email]);
      expect(users).to.have.length(1);
      expect(users[0]).to.include({
        role: 'admin',
        status: 'active',
        name: 'Ada <Lovelace>',
        password_hash: null,
      });
      const events = await query<{ type: string; data: { object: { id: string; role: string } } }>(
        `select type, data from events where organization_id = ? and type like 'user.%' order by seq`,
        [org.organizationId],
      );
      const created = events.filter((e) => e.type === 'user.created' && e.data.object.id === users[0]!.id);
      expect(created).to.have.length(1);
      expect(created[0]!.data.object.role).to.equal('admin');
      const audit = await query<{ action: string; actor_id: string; status: number }>(
        'select action, actor_id, status from audit_logs where organization_id = ? and actor_id = ?',
        [org.organizationId, users[0]!.id],
      );
      expect(audit).to.deep.include({ action: 'auth.sso_user_created', actor_id: users[0]!.id, status: 200 });

      // The code signs the new user in.
      const out = await exchangeSsoCode(ctx(), { code });
      expect(out.user).to.include({ id: users[0]!.id, email, role: 'admin', status: 'active' });
    });

    it('signs the same user in again: no second user, no second user.created', async () => {
      const org = await enterprise();
      const email = `grace@${org.domain}`;
      const first = await exchangeSsoCode(ctx(), { code: codeOfPage(await finish(org, { email })) });
      const before = await footprint(org.organizationId);
      const second = await exchangeSsoCode(ctx(), { code: codeOfPage(await finish(org, { email })) });
      expect(second.user.id).to.equal(first.user.id);
      const after = await footprint(org.organizationId);
      expect(after.users).to.equal(before.users);
      const created = await query(
        `select 1 from events where organization_id = ? and type = 'user.created' and data->'object'->>'id' = ?`,
        [org.organizationId, first.user.id],
      );
      expect(created).to.have.length(1);
    });

    it('makes one user of two first sign-ins of one address at the same moment', async () => {
      const org = await enterprise();
      const email = `twin@${org.domain}`;
      const [a, b] = await Promise.all([signInOf(org), signInOf(org)]);
      const answers = await Promise.all([
        finishSignIn(s.deps, a, { email }),
        finishSignIn(s.deps, b, { email }),
      ]);
      const [first, second] = await Promise.all(
        answers.map((x) => exchangeSsoCode(ctx(), { code: codeOfPage(x) })),
      );
      expect(second!.user.id).to.equal(first!.user.id);
      expect(await query('select 1 from users where email = ?', [email])).to.have.length(1);
      const created = await query(
        `select 1 from events where organization_id = ? and type = 'user.created' and data->'object'->>'id' = ?`,
        [org.organizationId, first!.user.id],
      );
      expect(created).to.have.length(1);
    });

    it('signs an existing user in with their role, and an invited one becomes active with the invited role', async () => {
      const org = await enterprise();
      const member = await createUser(s.deps, org.organizationId, { role: 'admin' });
      const memberEmail = `member-${randomBytes(3).toString('hex')}@${org.domain}`;
      await query('update users set email = ? where id = ?', [memberEmail, member.id]);
      const out = await exchangeSsoCode(ctx(), {
        code: codeOfPage(await finish(org, { email: memberEmail })),
      });
      expect(out.user).to.include({ id: member.id, role: 'admin' });

      const invitedEmail = `invited@${org.domain}`;
      const invitedId = newId('usr');
      await query(
        `insert into users (id, created_at, updated_at, organization_id, email, name, password_hash, role, status, permissions, two_factor_enabled)
         values (?, now(), now(), ?, ?, 'Invited One', null, 'admin', 'invited', '{}', false)`,
        [invitedId, org.organizationId, invitedEmail],
      );
      const signedIn = await exchangeSsoCode(ctx(), {
        code: codeOfPage(await finish(org, { email: invitedEmail })),
      });
      expect(signedIn.user).to.include({ id: invitedId, role: 'admin', status: 'active' });
      const updated = await query(
        `select 1 from events where organization_id = ? and type = 'user.updated' and data->'object'->>'id' = ?`,
        [org.organizationId, invitedId],
      );
      expect(updated).to.have.length(1);
    });

    it('redirects to return_to with ?code=, and a refusal with ?error=&error_description=', async () => {
      const org = await enterprise();
      const ok = await finish(org, { email: `linus@${org.domain}` }, `${APP_ORIGIN}/sso/done?keep=1`);
      expect(ok.status).to.equal(302);
      const location = new URL(ok.headers.Location!);
      expect(`${location.origin}${location.pathname}`).to.equal(`${APP_ORIGIN}/sso/done`);
      expect(location.searchParams.get('keep')).to.equal('1');
      expect(location.searchParams.get('code')).to.match(/^ssoc_/);
      expect([...location.searchParams.keys()].sort()).to.deep.equal(['code', 'keep']);
      expect(ok.headers['Referrer-Policy']).to.equal('no-referrer');

      const refused = await finish(org, { email: 'linus@elsewhere.test' }, 'http://127.0.0.1:8976/cb');
      expect(refused.status).to.equal(302);
      const back = new URL(refused.headers.Location!);
      expect(back.origin).to.equal('http://127.0.0.1:8976');
      expect(back.searchParams.get('error')).to.equal('SSO_DOMAIN_NOT_ALLOWED');
      expect(back.searchParams.get('error_description')).to.be.a('string').and.not.equal('');
      expect(back.searchParams.has('code')).to.equal(false);
    });

    describe('refusals create nothing', () => {
      it('refuses a suspended user (SSO_USER_DISABLED, 403)', async () => {
        const org = await enterprise();
        const u = await createUser(s.deps, org.organizationId);
        const email = `suspended@${org.domain}`;
        await query(`update users set email = ?, status = 'suspended' where id = ?`, [email, u.id]);
        const before = await footprint(org.organizationId);
        expectRefusalPage(await finish(org, { email }), 'SSO_USER_DISABLED', 403);
        expect(await footprint(org.organizationId)).to.deep.equal(before);
      });

      it('refuses a removed user of the organization rather than making a new one (SSO_USER_DISABLED)', async () => {
        const org = await enterprise();
        const u = await createUser(s.deps, org.organizationId);
        const email = `removed@${org.domain}`;
        await query('update users set email = ?, deleted_at = now() where id = ?', [email, u.id]);
        const before = await footprint(org.organizationId);
        expectRefusalPage(await finish(org, { email }), 'SSO_USER_DISABLED', 403);
        expect(await footprint(org.organizationId)).to.deep.equal(before);
      });

      it('refuses an address that has an account in another organization (SSO_EMAIL_TAKEN)', async () => {
        const org = await enterprise();
        const other = await createOrg(s.deps);
        const email = `taken@${org.domain}`;
        await query('update users set email = ? where id = ?', [email, other.id]);
        const before = await footprint(org.organizationId);
        const beforeOther = await footprint(other.organizationId);
        expectRefusalPage(await finish(org, { email }), 'SSO_EMAIL_TAKEN', 403);
        expect(await footprint(org.organizationId)).to.deep.equal(before);
        expect(await footprint(other.organizationId)).to.deep.equal(beforeOther);
        // That account still signs in with its password.
        expect((await loginAs(email, DEFAULT_PASSWORD)).user.id).to.equal(other.id);
      });

      it('refuses an address outside the organization’s verified domains, pending or another organization’s (SSO_DOMAIN_NOT_ALLOWED)', async () => {
        const org = await enterprise();
        const otherOrg = await enterprise();
        const sso = ssoRepositoryOf(s.deps);
        const pending = `pending-${randomBytes(4).toString('hex')}.test`;
        await sso.transaction(s.deps.db.orm.em.fork(), (tx) =>
          sso.replaceDomains(tx, org.organizationId, [org.domain, pending], clock.now(), () => 'token'),
        );
        const before = await footprint(org.organizationId);
        for (const email of [
          `a@${pending}`,
          `b@${otherOrg.domain}`,
          'c@example.test',
          `d@sub.${org.domain}`,
        ]) {
          expectRefusalPage(await finish(org, { email }), 'SSO_DOMAIN_NOT_ALLOWED', 403);
        }
        expect(await footprint(org.organizationId)).to.deep.equal(before);
      });

      it('refuses an address the IdP says is not verified (SSO_EMAIL_NOT_VERIFIED)', async () => {
        const org = await enterprise();
        const before = await footprint(org.organizationId);
        expectRefusalPage(
          await finish(org, { email: `x@${org.domain}`, emailVerified: false }),
          'SSO_EMAIL_NOT_VERIFIED',
          403,
        );
        expect(await footprint(org.organizationId)).to.deep.equal(before);
      });

      it('refuses a replayed SAML assertion (SSO_ASSERTION_INVALID, 401)', async () => {
        const org = await enterprise();
        const assertion = {
          id: `_${randomBytes(8).toString('hex')}`,
          notOnOrAfter: new Date(clock.now().getTime() + 300_000),
        };
        const email = `replay@${org.domain}`;
        codeOfPage(await finishSignIn(s.deps, await signInOf(org), { email }, { assertion }));
        const before = await footprint(org.organizationId);
        expectRefusalPage(
          await finishSignIn(s.deps, await signInOf(org), { email }, { assertion }),
          'SSO_ASSERTION_INVALID',
          401,
        );
        expect(await footprint(org.organizationId)).to.deep.equal(before);
        // Another organization may see the same ID.
        const other = await enterprise();
        codeOfPage(
          await finishSignIn(
            s.deps,
            await signInOf(other),
            { email: `replay@${other.domain}` },
            { assertion },
          ),
        );
      });

      it('refuses a state used already, unknown, or older than 10 minutes (SSO_STATE_INVALID)', async () => {
        const org = await enterprise();
        const before = await footprint(org.organizationId);
        const started = await startSso(ctx(), { email: `x@${org.domain}` });
        const state = new URL(started.authorization_url).searchParams.get('RelayState')!;
        await consumeSsoState(s.deps, state);
        await expectSsoFailure(consumeSsoState(s.deps, state), 'SSO_STATE_INVALID');
        await expectSsoFailure(consumeSsoState(s.deps, `${state}x`), 'SSO_STATE_INVALID');
        await expectSsoFailure(consumeSsoState(s.deps, undefined), 'SSO_STATE_INVALID');

        const late = await startSso(ctx(), { email: `x@${org.domain}` });
        const lateState = new URL(late.authorization_url).searchParams.get('RelayState')!;
        clock.advance(10 * 60_000);
        await expectSsoFailure(consumeSsoState(s.deps, lateState), 'SSO_STATE_INVALID');
        expect(await footprint(org.organizationId)).to.deep.equal(before);
      });

      it('refuses a sign-in whose organization left Enterprise or lost its connection meanwhile', async () => {
        const org = await enterprise();
        const signIn = await signInOf(org);
        await s.deps.db.orm.em.fork().nativeUpdate(Organization, { id: org.organizationId }, { plan: 'pro' });
        const before = await footprint(org.organizationId);
        expectRefusalPage(
          await finishSignIn(s.deps, signIn, { email: `x@${org.domain}` }),
          'SSO_STATE_INVALID',
          400,
        );
        expect(await footprint(org.organizationId)).to.deep.equal(before);
      });
    });
  });

  describe('POST /auth/sso/token', () => {
    it('answers exactly the body of /auth/login, opens a session with method sso, emits user.login, with no two-factor step', async () => {
      const org = await enterprise();
      const member = await createUser(s.deps, org.organizationId);
      const email = `twofactor@${org.domain}`;
      await query('update users set email = ?, two_factor_enabled = true where id = ?', [email, member.id]);
      const code = codeOfPage(await finish(org, { email }));
      const out = await exchangeSsoCode(ctx(), { code });
      expect(ZLoginOutput.strict().parse(out)).to.deep.equal(out);
      const passwordLogin = await loginAs(org.owner.email, DEFAULT_PASSWORD);
      expect(Object.keys(out)).to.deep.equal(Object.keys(passwordLogin));
      expect(Object.keys(out.user)).to.deep.equal(Object.keys(passwordLogin.user));
      expect(out).to.include({ success: true, token_type: 'Bearer', expires_in: passwordLogin.expires_in });
      expect(out.user).to.include({ id: member.id, email });

      // The tokens work, and the session says how it was opened.
      const me = await s.caller(out.token).auth.me();
      expect(me.user.id).to.equal(member.id);
      const sessions = await query<{ method: string }>(
        'select method from login_sessions where user_id = ? order by created_at desc, id desc',
        [member.id],
      );
      expect(sessions.map((r) => r.method)).to.include('sso');
      const [owners] = await query<{ method: string }>(
        'select method from login_sessions where user_id = ? limit 1',
        [org.owner.id],
      );
      expect(owners!.method).to.equal('password');
      const logins = await query(
        `select 1 from events where organization_id = ? and type = 'user.login' and data->'object'->>'id' = ?`,
        [org.organizationId, member.id],
      );
      expect(logins.length).to.be.at.least(1);
      const u = await s.deps.db.orm.em.fork().findOneOrFail(User, member.id);
      expect(u.lastLogin?.getTime()).to.equal(clock.now().getTime());
    });

    it('works once: a second use is 401 INVALID_CREDENTIALS, and so are unknown codes', async () => {
      const org = await enterprise();
      const code = codeOfPage(await finish(org, { email: `once@${org.domain}` }));
      await exchangeSsoCode(ctx(), { code });
      await expectAppError(exchangeSsoCode(ctx(), { code }), 'INVALID_CREDENTIALS');
      await expectAppError(
        exchangeSsoCode(ctx(), { code: `ssoc_${randomBytes(32).toString('base64url')}` }),
        'INVALID_CREDENTIALS',
      );
      await expectAppError(exchangeSsoCode(ctx(), { code: 'rt_not-a-code' }), 'INVALID_CREDENTIALS');
    });

    it('expires after 60 seconds', async () => {
      const org = await enterprise();
      const email = `slow@${org.domain}`;
      const inTime = codeOfPage(await finish(org, { email }));
      clock.advance(59_999);
      await exchangeSsoCode(ctx(), { code: inTime });
      const late = codeOfPage(await finish(org, { email }));
      clock.advance(60_000);
      await expectAppError(exchangeSsoCode(ctx(), { code: late }), 'INVALID_CREDENTIALS');
    });

    it('gives nothing to a user suspended after the sign-in', async () => {
      const org = await enterprise();
      const email = `later@${org.domain}`;
      const code = codeOfPage(await finish(org, { email }));
      await query(`update users set status = 'suspended' where email = ?`, [email]);
      const before = await query(
        'select 1 from login_sessions s join users u on u.id = s.user_id where u.email = ?',
        [email],
      );
      await expectAppError(exchangeSsoCode(ctx(), { code }), 'INVALID_CREDENTIALS');
      const after = await query(
        'select 1 from login_sessions s join users u on u.id = s.user_id where u.email = ?',
        [email],
      );
      expect(after.length).to.equal(before.length);
    });
  });

  it('purges sign-ins, codes and remembered assertions once expired', async () => {
    const org = await enterprise();
    const started = await startSso(ctx(), { email: `p@${org.domain}` });
    const state = new URL(started.authorization_url).searchParams.get('RelayState')!;
    const assertion = {
      id: `_${randomBytes(8).toString('hex')}`,
      notOnOrAfter: new Date(clock.now().getTime() + 60_000),
    };
    codeOfPage(await finishSignIn(s.deps, await signInOf(org), { email: `p@${org.domain}` }, { assertion }));
    clock.advance(10 * 60_000 + 1);
    await purgeExpiredSso(s.deps, clock.now());
    expect(await query('select 1 from sso_sign_ins where state_hash = ?', [sha256Hex(state)])).to.have.length(
      0,
    );
    expect(
      await query('select 1 from sso_codes where organization_id = ?', [org.organizationId]),
    ).to.have.length(0);
    expect(
      await query('select 1 from sso_assertions where organization_id = ? and assertion_id = ?', [
        org.organizationId,
        assertion.id,
      ]),
    ).to.have.length(0);
  });
});
