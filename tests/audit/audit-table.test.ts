// Test tier: server
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import { createOrg, createUser, uniqueEmail, type TestUser } from '../support/factories.js';
import { FakeClock } from '../support/fake-clock.js';
import { http } from '../support/http.js';
import { listProcedures } from '../support/security-table.js';
import { startTestServer, type Caller, type TestServer } from '../support/server.js';
import { auditFixtures, type AuditCall } from './audit-fixtures.js';

/**
 * The audit table (docs/audit-log.md, "Audit log"), generated from the router like the security table: every mutation, called
 * the way a user succeeds with it, writes exactly one entry in its organization, naming the procedure, the actor,
 * the target and the status answered. A mutation without a fixture in audit-fixtures.ts fails the table.
 */

interface Entry {
  id: string;
  action: string;
  actor_type: string;
  actor_id: string;
  target_type: string | null;
  target_id: string | null;
  status: number;
  request_id: string | null;
  ip: string | null;
}

function call(caller: Caller, path: string, input: unknown): Promise<unknown> {
  const fn = path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], caller) as (
    i: unknown,
  ) => Promise<unknown>;
  return fn(input);
}

describe('audit table (every mutation of the router)', function () {
  let s: TestServer;
  const clock = new FakeClock('2026-11-24T09:00:00.000Z');
  before(async () => {
    s = await startTestServer({ clock });
  });
  after(async () => {
    await s?.close();
  });

  const entries = async (organizationId: string): Promise<Entry[]> =>
    s.deps.db.orm.em
      .fork()
      .execute<Entry[]>('select * from audit_logs where organization_id = ? order by created_at, id', [
        organizationId,
      ]);

  const mutations = listProcedures().filter((p) => p.type === 'mutation');

  it('has a fixture for every mutation', () => {
    const missing = mutations.map((p) => p.path).filter((p) => !auditFixtures[p]);
    expect(missing, 'add them to tests/audit/audit-fixtures.ts').to.deep.equal([]);
  });

  for (const p of mutations) {
    it(`${p.path}: one entry on success, with its status`, async function () {
      const fixture = auditFixtures[p.path];
      if (!fixture) this.skip();
      const owner = await createOrg(s.deps, { plan: 'enterprise' });
      const prepared: AuditCall = await fixture({ s, owner, clock });
      const before = await entries(owner.organizationId);
      const output = await call(s.caller(prepared.token), p.path, prepared.input);
      const organizationId = prepared.organizationOf?.(output) ?? owner.organizationId;
      const after = await entries(organizationId);
      const added = after.filter((e) => !before.some((b) => b.id === e.id));
      expect(
        added.map((e) => e.action),
        'entries written',
      ).to.deep.equal([p.path]);
      const [entry] = added;
      expect(entry!.status).to.equal(p.meta.successStatus ?? 200);
      expect(entry!.actor_type).to.equal('user');
      expect(entry!.actor_id).to.match(/^usr_/);
      expect(entry!.request_id).to.match(/^req_/);
      if (prepared.target)
        expect({ type: entry!.target_type, id: entry!.target_id }).to.deep.equal(prepared.target(output));
    });
  }

  describe('refused and failed changes', () => {
    it('records a 403 (a member creating a webhook), a 402 (over the plan) and a 409 (a duplicate email)', async () => {
      const owner = await createOrg(s.deps, { plan: 'starter' });
      const member = await createUser(s.deps, owner.organizationId, { role: 'member' });
      const forbidden = await http(s.baseUrl, 'POST', '/v1/webhooks', {
        token: member.token,
        body: { url: 'https://example.com/hook', events: ['user.created'] },
      });
      expect(forbidden.status).to.equal(403);

      const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const dup = await http(s.baseUrl, 'POST', '/v1/users', {
        token: owner.token,
        body: { email: admin.email, name: 'Dup', role: 'member', send_invitation: false },
      });
      expect(dup.status).to.equal(409);

      for (let i = 0; i < 10; i++) {
        await s
          .caller(owner.token)
          .vpn.connections.create({ name: `c${i}`, location: 'eu-west', protocol: 'openvpn' });
      }
      const over = await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
        token: owner.token,
        body: { name: 'one too many', location: 'eu-west', protocol: 'openvpn' },
      });
      expect(over.status).to.equal(402);

      const all = await entries(owner.organizationId);
      const refused = all.filter((e) => e.status >= 400).map((e) => [e.action, e.status, e.actor_id]);
      // One fake-clock instant: compared as a set.
      expect(refused).to.have.deep.members([
        ['webhooks.create', 403, member.id],
        ['users.create', 409, owner.id],
        ['vpn.connections.create', 402, owner.id],
      ]);
      // The duplicate's transaction rolled back: no success entry of it.
      expect(all.filter((e) => e.action === 'users.create' && e.status === 201)).to.have.length(0);
      expect(forbidden.headers.get('x-request-id')).to.equal(
        all.find((e) => e.action === 'webhooks.create')!.request_id,
      );
    });

    it('records a failed login in the organization of the user tried, and nothing for an unknown email', async () => {
      const owner = await createOrg(s.deps);
      const before = (await entries(owner.organizationId)).length;
      const bad = await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: owner.email, password: 'wrong-password' },
        headers: { 'user-agent': 'audit-test/1.0' },
      });
      expect(bad.status).to.equal(401);
      const unknown = await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: uniqueEmail('nobody'), password: 'wrong-password' },
      });
      expect(unknown.status).to.equal(401);
      const added = (await entries(owner.organizationId)).slice(before);
      expect(added.map((e) => [e.action, e.status, e.actor_id])).to.deep.equal([
        ['auth.login_failed', 401, owner.id],
      ]);
      const [row] = await s.deps.db.orm.em
        .fork()
        .execute<{ user_agent: string; ip: string }[]>('select user_agent, ip from audit_logs where id = ?', [
          added[0]!.id,
        ]);
      expect(row).to.deep.equal({ user_agent: 'audit-test/1.0', ip: '127.0.0.1' });
    });

    it('never holds a secret: passwords, tokens, webhook and two-factor secrets sent through mutations', async () => {
      const password = 'Secret-Passw0rd-Only-Here';
      const owner = await createOrg(s.deps, { password });
      const secrets: string[] = [password, owner.token, owner.refreshToken];
      const caller = s.caller(owner.token);
      const refreshed = await caller.auth.refresh({ refresh_token: owner.refreshToken });
      secrets.push(refreshed.token, refreshed.refresh_token);
      const hook = await caller.webhooks.create({
        url: 'https://example.com/audit',
        events: ['user.created'],
      });
      secrets.push(hook.webhook.secret);
      const setup = await caller.auth.twoFactor.setup({});
      secrets.push(setup.secret);
      const code = (URI.parse(setup.otpauth_url) as TOTP).generate({ timestamp: clock.now().getTime() });
      const enabled = await caller.auth.twoFactor.enable({ password: owner.password, code });
      secrets.push(code, ...enabled.recovery_codes);
      const invited = await caller.users.create({
        email: uniqueEmail('secret'),
        name: 'Invitee',
        role: 'member',
        send_invitation: false,
      });
      const token = new URL(invited.invitation_url!).searchParams.get('token')!;
      secrets.push(token);
      await s.caller().users.acceptInvitation({ token, password: 'Another-Secret-Pw-9' });
      secrets.push('Another-Secret-Pw-9');
      const key = await caller.apiKeys.create({ name: 'secret key', permissions: ['vpn:write'] });
      secrets.push(key.secret);
      await s
        .caller(key.secret)
        .vpn.connections.create({ name: 'k', location: 'eu-west', protocol: 'openvpn' });

      const rows = await entries(owner.organizationId);
      expect(rows.length).to.be.greaterThan(5);
      const dump = JSON.stringify(rows);
      for (const secret of secrets) expect(dump, 'a secret in the audit log').to.not.include(secret);
    });
  });

  describe('API keys', () => {
    it("names the key as the actor of what is done with it, with its creator's email", async () => {
      const owner = await createOrg(s.deps);
      const { api_key, secret } = await s
        .caller(owner.token)
        .apiKeys.create({ name: 'automation', permissions: ['vpn:read', 'vpn:write'] });
      const { connection } = await s
        .caller(secret)
        .vpn.connections.create({ name: 'by key', location: 'eu-west', protocol: 'openvpn' });
      // Refused (a role-gated operation): recorded too, with the key as the actor.
      await s
        .caller(secret)
        .webhooks.create({ url: 'https://example.com/k', events: ['user.created'] })
        .catch(() => undefined);
      const rows = await s.deps.db.orm.em.fork().execute<
        {
          action: string;
          actor_type: string;
          actor_id: string;
          actor_email: string;
          status: number;
          target_id: string | null;
        }[]
      >('select action, actor_type, actor_id, actor_email, status, target_id from audit_logs where organization_id = ? and actor_type = ? order by action', [
        owner // The fake clock gives both entries one time: ordered by action.
        .organizationId,
        'api_key',
      ]);
      expect(rows).to.deep.equal([
        {
          action: 'vpn.connections.create',
          actor_type: 'api_key',
          actor_id: api_key.id,
          actor_email: owner.email,
          status: 201,
          target_id: connection.id,
        },
        {
          action: 'webhooks.create',
          actor_type: 'api_key',
          actor_id: api_key.id,
          actor_email: owner.email,
          status: 403,
          target_id: null,
        },
      ]);
    });
  });

  describe('GET /audit-logs', () => {
    let owner: TestUser;
    before(async () => {
      owner = await createOrg(s.deps);
      const caller = s.caller(owner.token);
      await caller.vpn.connections.create({ name: 'a', location: 'eu-west', protocol: 'openvpn' });
      clock.advance(1000);
      const { connection } = await caller.vpn.connections.create({
        name: 'b',
        location: 'eu-west',
        protocol: 'openvpn',
      });
      clock.advance(1000);
      await caller.vpn.connections.delete({ id: connection.id });
    });

    it('lists newest first with the entry shape, filters, and a cursor', async () => {
      const res = await http(s.baseUrl, 'GET', '/v1/audit-logs?limit=2', { token: owner.token });
      expect(res.status).to.equal(200);
      expect(res.body.total).to.equal(3);
      expect(res.body.has_more).to.equal(true);
      const [first] = res.body.audit_logs;
      expect(first).to.have.keys([
        'id',
        'created_at',
        'actor',
        'action',
        'target',
        'request_id',
        'ip',
        'user_agent',
        'status',
      ]);
      expect(first.action).to.equal('vpn.connections.delete');
      expect(first.actor).to.deep.equal({ type: 'user', id: owner.id, email: owner.email });
      expect(first.target.type).to.equal('vpn_connection');
      const next = await http(
        s.baseUrl,
        'GET',
        `/v1/audit-logs?limit=2&starting_after=${res.body.audit_logs[1].id}`,
        {
          token: owner.token,
        },
      );
      expect(next.body.audit_logs).to.have.length(1);
      expect(next.body.has_more).to.equal(false);

      const byTarget = await http(s.baseUrl, 'GET', `/v1/audit-logs?target_id=${first.target.id}`, {
        token: owner.token,
      });
      expect(byTarget.body.audit_logs.map((e: { action: string }) => e.action)).to.deep.equal([
        'vpn.connections.delete',
        'vpn.connections.create',
      ]);
      const byAction = await http(s.baseUrl, 'GET', '/v1/audit-logs?action=vpn.connections.create', {
        token: owner.token,
      });
      expect(byAction.body.total).to.equal(2);
      const since = await http(
        s.baseUrl,
        'GET',
        `/v1/audit-logs?since=${encodeURIComponent(first.created_at)}`,
        { token: owner.token },
      );
      expect(since.body.audit_logs.map((e: { id: string }) => e.id)).to.deep.equal([first.id]);
      const bad = await http(s.baseUrl, 'GET', '/v1/audit-logs?since=yesterday', { token: owner.token });
      expect(bad.status).to.equal(400);
    });

    it('is for owners and admins of the organization only', async () => {
      const member = await createUser(s.deps, owner.organizationId, { role: 'member' });
      expect((await http(s.baseUrl, 'GET', '/v1/audit-logs', { token: member.token })).status).to.equal(403);
      const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      expect((await http(s.baseUrl, 'GET', '/v1/audit-logs', { token: admin.token })).status).to.equal(200);
      const other = await createOrg(s.deps);
      const theirs = await http(s.baseUrl, 'GET', '/v1/audit-logs', { token: other.token });
      expect(theirs.body.audit_logs.some((e: { actor: { id: string } }) => e.actor.id === owner.id)).to.equal(
        false,
      );
    });
  });
});
