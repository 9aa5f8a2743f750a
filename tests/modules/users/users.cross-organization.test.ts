// Test tier: server
import { expect } from 'chai';
import { MemoryMailDriver } from '../../../server/mail/mail-driver.js';
import { createOrg, createUser, uniqueEmail, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';

/**
 * One address, several organizations (docs/users-and-permissions.md, "Invitations"; docs/security.md): a user row
 * is unique per organization and email, an address has one sign-in account across the platform, and neither an
 * invitation nor its answer tells one organization about another.
 */
describe('one address across organizations (invitations, sign-in, reset)', function () {
  this.timeout(60_000);
  let s: TestServer;
  const outbox = new MemoryMailDriver();
  // On PostgreSQL a database of its own: reset mails are sent by a job, which another test server on the run's
  // database (with another mail driver) could otherwise take.
  let scratch: ScratchDatabase | undefined;
  before(async () => {
    scratch = await ownPostgresDatabase('users_cross_org');
    s = await startTestServer({
      mail: outbox,
      env: { DATABASE_URL: scratch?.url ?? process.env.DATABASE_URL },
    });
  });
  after(async () => {
    await s?.close();
    await scratch?.drop();
  });

  const query = <T extends object[]>(sql: string, params: unknown[] = []) =>
    s.deps.db.orm.em.fork().execute<T>(sql, params);

  async function invite(by: TestUser, email: string) {
    return http(s.baseUrl, 'POST', '/v1/users', {
      token: by.token,
      body: { email, name: 'Invited', role: 'member', send_invitation: false },
    });
  }
  const tokenOf = (res: { body: { invitation_url: string } }) =>
    new URL(res.body.invitation_url).searchParams.get('token')!;
  const accept = (token: string, password = 'the-invited-password') =>
    http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', { body: { token, password } });
  const login = (email: string, password: string) =>
    http(s.baseUrl, 'POST', '/v1/auth/login', { body: { email, password } });
  const register = (email: string, password = 'a-registered-password') =>
    http(s.baseUrl, 'POST', '/v1/auth/register', {
      body: { email, password, name: 'Registered', organization_name: 'Registered Co' },
    });
  /** The shape of an answer without its values that name the new row. */
  const shape = (body: Record<string, unknown>) => ({
    keys: Object.keys(body).sort(),
    userKeys: Object.keys(body.user as object).sort(),
    status: (body.user as { status: string }).status,
  });

  it('answers an invitation the same whether the address has an account elsewhere, is invited elsewhere, or is unknown', async () => {
    const a = await createOrg(s.deps);
    const b = await createOrg(s.deps);
    const c = await createOrg(s.deps);
    const pendingInB = uniqueEmail('pending');
    expect((await invite(b, pendingInB)).status).to.equal(201);

    const known = await invite(b, a.email);
    const invitedElsewhere = await invite(c, pendingInB);
    const unknown = await invite(b, uniqueEmail('unknown'));
    for (const res of [known, invitedElsewhere, unknown]) {
      expect(res.status, res.text).to.equal(201);
      expect(shape(res.body)).to.deep.equal(shape(unknown.body));
    }
    expect(known.body.user).to.include({ email: a.email, status: 'invited' });

    // In its own organization an address is still one user (any letter case).
    const again = await invite(b, a.email.toUpperCase());
    expect(again.status).to.equal(409);
    expect(again.body.error.code).to.equal('CONFLICT');
    expect(again.body.error.message).to.match(/in this organization/);
    const rows = await query<{ organization_id: string; status: string }[]>(
      'select "organization_id", "status" from "users" where "email" = ? order by "created_at"',
      [a.email],
    );
    expect(rows).to.deep.equal([
      { organization_id: a.organizationId, status: 'active' },
      { organization_id: b.organizationId, status: 'invited' },
    ]);
  });

  it('lets an address invited somewhere register, and signs it in to its account, not to the invitation', async () => {
    const b = await createOrg(s.deps);
    const email = uniqueEmail('invited-first');
    const invited = await invite(b, email);
    expect(invited.status).to.equal(201);

    const registered = await register(email);
    expect(registered.status, registered.text).to.equal(201);
    const own = registered.body.user as { id: string };

    const signedIn = await login(email, 'a-registered-password');
    expect(signedIn.status, signedIn.text).to.equal(200);
    expect(signedIn.body.user.id).to.equal(own.id);
    expect(signedIn.body.user.id).to.not.equal(invited.body.user.id);
    // The invitation is not an account: its row has no password, and a second registration is refused.
    expect((await register(email)).status).to.equal(409);
  });

  it('answers 409 with what to do when the invited address already has an account in another organization', async () => {
    const a = await createOrg(s.deps);
    const b = await createOrg(s.deps);
    const member = await createUser(s.deps, a.organizationId);
    const invited = await invite(b, member.email);
    expect(invited.status).to.equal(201);
    const token = tokenOf(invited);

    const refused = await accept(token);
    expect(refused.status, refused.text).to.equal(409);
    expect(refused.body.success).to.equal(false);
    expect(refused.body.error.code).to.equal('CONFLICT');
    expect(refused.body.error.message).to.match(/already has an account in another organization/);
    expect(refused.body.error.message).to.match(/sign in/);

    // Nothing changed: the account keeps its password, the invitation stays pending.
    expect((await login(member.email, member.password)).status).to.equal(200);
    expect((await login(member.email, 'the-invited-password')).status).to.equal(401);
    const [row] = await query<{ status: string; accepted_at: Date | null }[]>(
      `select u."status", i."accepted_at" from "user_invitations" i join "users" u on u."id" = i."user_id"
        where u."id" = ?`,
      [invited.body.user.id],
    );
    expect(row).to.deep.equal({ status: 'invited', accepted_at: null });

    // Once the other account is gone, the same invitation works.
    expect((await http(s.baseUrl, 'DELETE', `/v1/users/${member.id}`, { token: a.token })).status).to.equal(
      200,
    );
    const accepted = await accept(token);
    expect(accepted.status, accepted.text).to.equal(200);
    const signedIn = await login(member.email, 'the-invited-password');
    expect(signedIn.status).to.equal(200);
    expect(signedIn.body.user.id).to.equal(invited.body.user.id);
  });

  it('activates one of two invitations of an address accepted at the same moment', async () => {
    const email = uniqueEmail('twice');
    const tokens: string[] = [];
    for (const org of [await createOrg(s.deps), await createOrg(s.deps)]) {
      tokens.push(tokenOf(await invite(org, email)));
    }
    const results = await Promise.all(tokens.map((t) => accept(t)));
    expect(results.map((r) => r.status).sort()).to.deep.equal([200, 409]);
    const conflictAnswer = results.find((r) => r.status === 409)!;
    expect(conflictAnswer.body.error.message).to.match(/another organization/);
    const active = await query<{ n: number }[]>(
      `select count(*)::int as "n" from "users" where "email" = ? and "status" <> 'invited'`,
      [email],
    );
    expect(active[0]!.n).to.equal(1);
  });

  describe('password reset', () => {
    const requestReset = (email: string) =>
      http(s.baseUrl, 'POST', '/v1/auth/password-reset', { body: { email } });
    const auditEntriesOf = (organizationId: string, email: string) =>
      query<{ action: string }[]>(
        `select "action" from "audit_logs" where "organization_id" = ? and "actor_email" = ? and "action" like '%eset%'`,
        [organizationId, email],
      );
    const mailTo = (email: string) =>
      waitFor(
        `a reset mail to ${email}`,
        () => outbox.sent.find((m) => m.to === email && m.kind === 'password_reset'),
        { timeoutMs: 10_000 },
      );

    it('treats an address that is only invited as unknown: same answer, no mail, no audit entry', async () => {
      const b = await createOrg(s.deps);
      const email = uniqueEmail('only-invited');
      const invited = await invite(b, email);
      const asked = await requestReset(email);
      const unknown = await requestReset(uniqueEmail('nobody'));
      expect(asked.status).to.equal(202);
      expect(asked.body).to.deep.equal(unknown.body);
      expect(await auditEntriesOf(b.organizationId, email)).to.deep.equal([]);
      // A reset asked afterwards for a real account is mailed: by then the first job has run too.
      await requestReset(b.email);
      await mailTo(b.email);
      expect(outbox.sent.filter((m) => m.to === email)).to.deep.equal([]);
      const tokens = await query<{ n: number }[]>(
        'select count(*)::int as "n" from "password_reset_tokens" where "user_id" = ?',
        [invited.body.user.id],
      );
      expect(tokens[0]!.n).to.equal(0);
    });

    it('resets the account of an address also invited elsewhere, in the account’s organization only', async () => {
      const b = await createOrg(s.deps);
      const email = uniqueEmail('both');
      expect((await invite(b, email)).status).to.equal(201);
      const registered = await register(email);
      expect(registered.status).to.equal(201);
      const own = registered.body.user as { id: string; organization_id?: string };
      const [account] = await query<{ organization_id: string }[]>(
        'select "organization_id" from "users" where "id" = ?',
        [own.id],
      );

      expect((await requestReset(email)).status).to.equal(202);
      expect(await auditEntriesOf(b.organizationId, email)).to.deep.equal([]);
      expect(await auditEntriesOf(account!.organization_id, email)).to.not.deep.equal([]);
      await mailTo(email);
      const tokens = await query<{ user_id: string }[]>(
        `select t."user_id" from "password_reset_tokens" t join "users" u on u."id" = t."user_id" where u."email" = ?`,
        [email],
      );
      expect(tokens).to.deep.equal([{ user_id: own.id }]);
    });
  });
});
