// Test tier: server
import { expect } from 'chai';
import {
  createOrg,
  createUser,
  DEFAULT_PASSWORD,
  uniqueEmail,
  type TestUser,
} from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';
import {
  fingerprint,
  populate,
  rowsOf,
  tablesWithOrganizationColumn,
  userKeyedRows,
  waitRemoved,
} from './organization-helpers.js';
import { waitFor } from '../../support/wait.js';

const get = (s: TestServer, token: string) => http(s.baseUrl, 'GET', '/v1/organization', { token });

describe('organization: view, rename, transfer ownership (HTTP)', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('shows the organization to any of its users, renames it for owner and admin only', async () => {
    const owner = await createOrg(s.deps, { name: 'Acme' });
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const member = await createUser(s.deps, owner.organizationId);
    await http(s.baseUrl, 'POST', '/v1/users', {
      token: owner.token,
      body: { email: uniqueEmail('inv'), name: 'Invited', role: 'member', send_invitation: false },
    });
    const res = await get(s, member.token);
    expect(res.status, res.text).to.equal(200);
    expect(res.body.success).to.equal(true);
    expect(res.body.organization).to.deep.include({
      id: owner.organizationId,
      name: 'Acme',
      plan: 'starter',
      owner_id: owner.id,
      users_count: 4,
    });
    expect(res.body.organization.created_at).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const forbidden = await http(s.baseUrl, 'PUT', '/v1/organization', {
      token: member.token,
      body: { name: 'X' },
    });
    expect(forbidden.status).to.equal(403);
    expect(forbidden.body.error.code).to.equal('FORBIDDEN');
    const bad = await http(s.baseUrl, 'PUT', '/v1/organization', { token: admin.token, body: { name: '' } });
    expect(bad.status).to.equal(400);
    const unknown = await http(s.baseUrl, 'PUT', '/v1/organization', {
      token: admin.token,
      body: { name: 'Acme 2', plan: 'enterprise' },
    });
    expect(unknown.status).to.equal(400);
    const renamed = await http(s.baseUrl, 'PUT', '/v1/organization', {
      token: admin.token,
      body: { name: '  Acme Labs ' },
    });
    expect(renamed.status, renamed.text).to.equal(200);
    expect(renamed.body.organization.name).to.equal('Acme Labs');
    expect((await get(s, owner.token)).body.organization.name).to.equal('Acme Labs');
    // Nothing of one organization in another's view.
    const other = await createOrg(s.deps, { name: 'Other' });
    expect((await get(s, other.token)).body.organization).to.include({
      id: other.organizationId,
      name: 'Other',
    });
  });

  it('reads a request sent without a body as `{}`, DELETE as POST: 400 naming the required fields', async () => {
    const owner = await createOrg(s.deps);
    const paths = (res: { body: { error: { details: { path: string }[] } } }) =>
      res.body.error.details.map((d) => d.path).sort();
    const del = await http(s.baseUrl, 'DELETE', '/v1/organization', { token: owner.token });
    expect(del.status, del.text).to.equal(400);
    expect(del.body.error.code).to.equal('VALIDATION_ERROR');
    expect(paths(del)).to.deep.equal(['confirm', 'password']);
    const post = await http(s.baseUrl, 'POST', '/v1/organization/transfer-ownership', { token: owner.token });
    expect(post.status, post.text).to.equal(400);
    expect(post.body.error.code).to.equal('VALIDATION_ERROR');
    expect(paths(post)).to.deep.equal(['password', 'user_id']);
    // A body in another media type is still 415.
    const text = await http(s.baseUrl, 'DELETE', '/v1/organization', {
      token: owner.token,
      headers: { 'content-type': 'text/plain' },
      rawBody: 'confirm',
    });
    expect(text.status, text.text).to.equal(415);
    expect((await get(s, owner.token)).status).to.equal(200);
  });

  it('transfers ownership to an active admin only, with the owner’s password; the roles’ permissions follow', async () => {
    const owner = await createOrg(s.deps);
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const member = await createUser(s.deps, owner.organizationId);
    const stranger = await createOrg(s.deps);
    const transfer = (token: string, body: unknown) =>
      http(s.baseUrl, 'POST', '/v1/organization/transfer-ownership', { token, body });

    expect((await transfer(admin.token, { user_id: owner.id, password: DEFAULT_PASSWORD })).status).to.equal(
      403,
    );
    const toMember = await transfer(owner.token, { user_id: member.id, password: DEFAULT_PASSWORD });
    expect(toMember.status).to.equal(409);
    expect(toMember.body.error.code).to.equal('CONFLICT');
    expect((await transfer(owner.token, { user_id: owner.id, password: DEFAULT_PASSWORD })).status).to.equal(
      409,
    );
    expect(
      (await transfer(owner.token, { user_id: stranger.id, password: DEFAULT_PASSWORD })).status,
    ).to.equal(404);
    expect(
      (await transfer(owner.token, { user_id: 'usr_nope', password: DEFAULT_PASSWORD })).status,
    ).to.equal(404);
    const wrong = await transfer(owner.token, { user_id: admin.id, password: 'wrong-password' });
    expect(wrong.status).to.equal(401);
    expect(wrong.body.error.code).to.equal('INVALID_CREDENTIALS');
    expect((await get(s, owner.token)).body.organization.owner_id).to.equal(owner.id);

    const done = await transfer(owner.token, { user_id: admin.id, password: DEFAULT_PASSWORD });
    expect(done.status, done.text).to.equal(200);
    expect(done.body.organization.owner_id).to.equal(admin.id);
    expect(done.body.previous_owner_id).to.equal(owner.id);

    // The new owner changes billing; the former owner, now an admin, no longer can.
    const pm = await http(s.baseUrl, 'POST', '/v1/billing/payment-methods', {
      token: admin.token,
      body: { payment_method: 'pm_card_visa' },
    });
    expect(pm.status, pm.text).to.equal(201);
    const refused = await http(s.baseUrl, 'POST', '/v1/billing/payment-methods', {
      token: owner.token,
      body: { payment_method: 'pm_card_visa' },
    });
    expect(refused.status).to.equal(403);
    const former = await http(s.baseUrl, 'GET', `/v1/users/${owner.id}`, { token: admin.token });
    expect(former.body.user.role).to.equal('admin');
    expect(former.body.user.permissions).to.not.include('billing:write');
    expect(former.body.user.permissions).to.include('billing:read');
    const next = await http(s.baseUrl, 'GET', `/v1/users/${admin.id}`, { token: admin.token });
    expect(next.body.user.role).to.equal('owner');
    expect(next.body.user.permissions).to.include('billing:write');

    const events = await s.deps.db.orm.em
      .fork()
      .execute<{ data: unknown }[]>(
        `select "data" from "events" where "organization_id" = ? and "type" = 'user.updated' order by "created_at", "id"`,
        [owner.organizationId],
      );
    const objects = events.map((e) => {
      const d = (typeof e.data === 'string' ? JSON.parse(e.data) : e.data) as {
        object?: { id: string; role: string };
        data?: { object: { id: string; role: string } };
      };
      return d.data?.object ?? d.object!;
    });
    expect(objects.map((o) => [o.id, o.role])).to.have.deep.members([
      [admin.id, 'owner'],
      [owner.id, 'admin'],
    ]);
  });
});

describe('organization deletion (HTTP)', function () {
  this.timeout(180_000);
  let s: TestServer;
  let rx: Receiver;
  before(async () => {
    s = await sharedServer();
    rx = await startReceiver();
  });
  after(async () => {
    await rx?.close();
  });

  it('refuses at once, disconnects, bills, delivers, then removes every row; other organizations are untouched', async () => {
    const owner = await createOrg(s.deps, { name: 'Doomed Inc' });
    const { admin, member, invitedId, invitationToken, recoveryCode, connectionId } = await populate(
      s,
      owner,
      rx.url,
    );
    // An API key, created under an Idempotency-Key (so a kept answer is among the organization's rows).
    const created = await http(s.baseUrl, 'POST', '/v1/api-keys', {
      token: owner.token,
      body: { name: 'doomed key', permissions: ['vpn:read'] },
      headers: { 'idempotency-key': 'doomed-key-1' },
    });
    expect(created.status, created.text).to.equal(201);
    const apiKey = created.body.secret as string;
    expect((await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: apiKey })).status).to.equal(200);
    const other = await createOrg(s.deps, { name: 'Bystander' });
    await populateLight(s, other);
    const before = await fingerprint(s.deps, other.organizationId);
    const present = await rowsOf(s.deps, owner.organizationId);
    // One of everything: every table with an organization column holds something of it.
    expect(Object.keys(present).sort()).to.deep.equal(
      [...(await tablesWithOrganizationColumn(s.deps)), 'organizations'].sort(),
    );

    const del = (body: unknown, token = owner.token) =>
      http(s.baseUrl, 'DELETE', '/v1/organization', { token, body });
    const notOwner = await del({ confirm: 'Doomed Inc', password: DEFAULT_PASSWORD }, admin.token);
    expect(notOwner.status).to.equal(403);
    const wrongName = await del({ confirm: 'doomed inc', password: DEFAULT_PASSWORD });
    expect(wrongName.status).to.equal(400);
    expect(wrongName.body.error.code).to.equal('VALIDATION_ERROR');
    expect(wrongName.body.error.details[0].path).to.equal('confirm');
    const wrongPassword = await del({ confirm: 'Doomed Inc', password: 'not-the-password' });
    expect(wrongPassword.status).to.equal(401);
    expect(wrongPassword.body.error.code).to.equal('INVALID_CREDENTIALS');
    const noBody = await http(s.baseUrl, 'DELETE', '/v1/organization', { token: owner.token });
    expect(noBody.status).to.equal(400);
    expect((await get(s, owner.token)).status).to.equal(200);

    // A two-factor sign-in started before the deletion.
    const challenge = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email: admin.email, password: DEFAULT_PASSWORD },
    });
    expect(challenge.body.two_factor_required, challenge.text).to.equal(true);

    // Unknown query parameters are ignored (conventions §1), as on every operation.
    const res = await http(s.baseUrl, 'DELETE', '/v1/organization?utm_source=newsletter&x=1', {
      token: owner.token,
      body: { confirm: 'Doomed Inc', password: DEFAULT_PASSWORD },
    });
    expect(res.status, res.text).to.equal(202);
    expect(res.body).to.include({ success: true, id: owner.organizationId });
    const scheduled = Date.parse(res.body.deletion_scheduled);
    expect(scheduled - Date.now()).to.be.within(23 * 3_600_000, 24 * 3_600_000 + 1000);

    // Every token and refresh token of the organization is refused at once; nobody of it signs in.
    for (const u of [owner, admin, member]) {
      const r = await get(s, u.token);
      expect(r.status).to.equal(401);
      expect(r.body.error.code).to.equal('UNAUTHORIZED');
      const refresh = await http(s.baseUrl, 'POST', '/v1/auth/refresh', {
        body: { refresh_token: u.refreshToken },
      });
      expect(refresh.status).to.equal(401);
    }
    const byKey = await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: apiKey });
    expect(byKey.status, byKey.text).to.equal(401);
    const login = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email: member.email, password: DEFAULT_PASSWORD },
    });
    expect(login.status).to.equal(401);
    const verify = await http(s.baseUrl, 'POST', '/v1/auth/2fa/verify', {
      body: { challenge_token: challenge.body.challenge_token, recovery_code: recoveryCode },
    });
    expect(verify.status, verify.text).to.equal(401);
    const accept = await http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', {
      body: { token: invitationToken, password: 'a-new-password-1' },
    });
    expect(accept.status, accept.text).to.equal(401);
    expect(invitedId).to.match(/^usr_/);

    // The events the deletion caused reach the organization's webhook.
    const received = await rx.waitFor((reqs) => {
      const mine = reqs.filter((r) => r.body.organization_id === owner.organizationId);
      return (
        mine.some((r) => r.body.type === 'vpn.disconnected' && r.body.data.object.id === connectionId) &&
        mine.some(
          (r) =>
            r.body.type === 'billing.invoice.created' &&
            r.body.data.object.billing_reason === 'subscription_final',
        ) &&
        mine.some(
          (r) => r.body.type === 'billing.subscription.updated' && r.body.data.object.status === 'canceled',
        )
      );
    }, 60_000);
    // The final invoice charges what was unbilled: the database's time in the period so far (the plan was paid in
    // advance, with the proration of the upgrade).
    const final = received.find(
      (r) =>
        r.body.organization_id === owner.organizationId &&
        r.body.type === 'billing.invoice.created' &&
        r.body.data.object.billing_reason === 'subscription_final',
    )!.body.data.object as { status: string; total: number; line_items: { description: string }[] };
    expect(final.status).to.equal('paid');
    expect(final.line_items.map((l) => l.description)).to.satisfy((d: string[]) =>
      d.some((x) => x.startsWith('Database ')),
    );
    expect(final.line_items.some((l) => /plan/i.test(l.description))).to.equal(false);

    // Then every row goes.
    await waitRemoved(s.deps, owner.organizationId);
    expect(await rowsOf(s.deps, owner.organizationId)).to.deep.equal({});
    // Its lists' counts too (docs/api-conventions.md, "Lists"), the other organization's stay as they were.
    const counts = await s.deps.db.orm.em
      .fork()
      .execute<{ n: string }[]>(`select count(*) as n from list_counts where scope_id = ?`, [
        owner.organizationId,
      ]);
    expect(Number(counts[0]!.n)).to.equal(0);
    expect(await userKeyedRows(s.deps, [owner.id, admin.id, member.id, invitedId])).to.equal(0);
    expect(await fingerprint(s.deps, other.organizationId)).to.deep.equal(before);
    expect((await get(s, other.token)).status).to.equal(200);

    // Its emails are free again.
    const again = await http(s.baseUrl, 'POST', '/v1/auth/register', {
      body: { email: owner.email, password: DEFAULT_PASSWORD, name: 'Back', organization_name: 'Reborn' },
    });
    expect(again.status, again.text).to.equal(201);
    const invite = await http(s.baseUrl, 'POST', '/v1/users', {
      token: again.body.token,
      body: { email: member.email, name: 'Member again', role: 'member', send_invitation: false },
    });
    expect(invite.status, invite.text).to.equal(201);
  });
});

/** A few rows in another organization (fingerprinted around the deletion). */
async function populateLight(s: TestServer, other: TestUser): Promise<void> {
  await createUser(s.deps, other.organizationId, { role: 'admin' });
  const conn = await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
    token: other.token,
    body: { name: 'Other laptop', location: 'eu-west', protocol: 'wireguard' },
  });
  expect(conn.status).to.equal(201);
  await waitFor('the connection to be active', async () => {
    const r = await http(s.baseUrl, 'GET', `/v1/vpn/connections/${conn.body.connection.id}`, {
      token: other.token,
    });
    return r.body.connection?.status === 'active' ? true : undefined;
  });
  // Disconnected again, so that the simulation's usage samples do not change it meanwhile.
  const off = await http(s.baseUrl, 'PUT', `/v1/vpn/connections/${conn.body.connection.id}`, {
    token: other.token,
    body: { status: 'inactive' },
  });
  expect(off.status, off.text).to.equal(200);
  await http(s.baseUrl, 'PUT', '/v1/organization', { token: other.token, body: { name: 'Bystander Ltd' } });
  // The API usage counters are written a few seconds after the calls: flush them before the fingerprint.
  await s.deps.apiUsage.flush();
}
