// Test tier: server
import { expect } from 'chai';
import { MemoryMailDriver } from '../../../server/mail/mail-driver.js';
import { Event } from '../../../server/events/event.entity.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { createOrg, createUser, uniqueEmail } from '../../support/factories.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function tokenOf(url: string): string {
  return new URL(url).searchParams.get('token')!;
}

describe('users over HTTP: a new member, start to finish', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('invite with a link, accept, log in, and see exactly what a member may see', async () => {
    const owner = await createOrg(s.deps);
    const colleague = await createUser(s.deps, owner.organizationId);
    const email = uniqueEmail('new');

    // The admin invites without mail and receives the link.
    const created = await http(s.baseUrl, 'POST', '/v1/users', {
      token: owner.token,
      body: { email, name: 'New Member', role: 'member', send_invitation: false },
    });
    expect(created.status).to.equal(201);
    expect(created.body.success).to.equal(true);
    const user = created.body.user;
    expect(user).to.include({ email, name: 'New Member', role: 'member', status: 'invited' });
    expect(user.id).to.match(/^usr_[a-z0-9]+$/);
    expect(created.headers.get('location')).to.equal(`${s.deps.config.publicBaseUrl}/v1/users/${user.id}`);
    expect(created.body.invitation_url).to.match(
      new RegExp(`^${s.deps.config.publicBaseUrl}/accept-invitation\\?token=`),
    );
    expect(user.permissions).to.deep.equal(['vpn:read', 'database:read', 'hosting:read']);
    expect(user.profile).to.deep.equal({ avatar_url: null, timezone: 'UTC', language: 'en' });
    expect(user.activity).to.deep.equal({ vpn_connections: 0, databases_created: 0, api_calls_30d: 0 });
    expect(user.created_at).to.match(ISO_MS);
    expect(user.last_login).to.equal(null);

    // Not yet active: cannot log in.
    const early = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email, password: 'a-new-password' },
    });
    expect(early.status).to.equal(401);

    // Accept the invitation.
    const token = tokenOf(created.body.invitation_url);
    const accepted = await http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', {
      body: { token, password: 'a-new-password' },
    });
    expect(accepted.status).to.equal(200);
    expect(accepted.body.success).to.equal(true);
    expect(accepted.body.user).to.include({ id: user.id, status: 'active' });

    // The token works once.
    const again = await http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', {
      body: { token, password: 'another-password' },
    });
    expect(again.status).to.equal(401);
    expect(again.body.error.code).to.equal('INVALID_CREDENTIALS');

    // Log in as the member.
    const login = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email, password: 'a-new-password' },
    });
    expect(login.status).to.equal(200);
    const memberToken = login.body.token as string;
    expect(login.body.user).to.include({ id: user.id, role: 'member', status: 'active' });

    // Themselves: yes, with profile and activity.
    const me = await http(s.baseUrl, 'GET', `/v1/users/${user.id}`, { token: memberToken });
    expect(me.status).to.equal(200);
    expect(me.body.user).to.include({ id: user.id, email, role: 'member', status: 'active' });
    expect(me.body.user.last_login).to.match(ISO_MS);
    expect(me.body.user.activity.api_calls_30d).to.be.at.least(1);
    const myPerms = await http(s.baseUrl, 'GET', `/v1/users/${user.id}/permissions`, { token: memberToken });
    expect(myPerms.status).to.equal(200);
    expect(myPerms.body.permissions).to.deep.equal({
      vpn: { read: true, write: false, delete: false },
      database: { read: true, write: false, delete: false },
      hosting: { read: true, write: false, delete: false },
      billing: { read: false, write: false },
    });

    // Their own name: yes. Anything else of theirs: 403 and nothing changes.
    const renamed = await http(s.baseUrl, 'PUT', `/v1/users/${user.id}`, {
      token: memberToken,
      body: { name: 'Renamed', profile: { timezone: 'Europe/Paris', language: 'fr' } },
    });
    expect(renamed.status).to.equal(200);
    expect(renamed.body.user.name).to.equal('Renamed');
    expect(renamed.body.user.profile).to.deep.equal({
      avatar_url: null,
      timezone: 'Europe/Paris',
      language: 'fr',
    });
    for (const body of [{ role: 'admin' }, { permissions: ['vpn:admin'] }, { status: 'active' }]) {
      const res = await http(s.baseUrl, 'PUT', `/v1/users/${user.id}`, { token: memberToken, body });
      expect(res.status, JSON.stringify(body)).to.equal(403);
      expect(res.body.error.code).to.equal('FORBIDDEN');
    }
    for (const body of [{ organization_id: 'org_x' }, { name: 'X', is_admin: true }]) {
      const res = await http(s.baseUrl, 'PUT', `/v1/users/${user.id}`, { token: memberToken, body });
      expect(res.status, JSON.stringify(body)).to.equal(400);
    }

    // Everyone else, and the admin endpoints: no.
    expect((await http(s.baseUrl, 'GET', '/v1/users', { token: memberToken })).status).to.equal(403);
    expect(
      (await http(s.baseUrl, 'POST', '/v1/users', { token: memberToken, body: { email: uniqueEmail() } }))
        .status,
    ).to.equal(403);
    expect(
      (await http(s.baseUrl, 'GET', `/v1/users/${colleague.id}`, { token: memberToken })).status,
    ).to.equal(404);
    expect((await http(s.baseUrl, 'GET', `/v1/users/${owner.id}`, { token: memberToken })).status).to.equal(
      404,
    );
    expect(
      (await http(s.baseUrl, 'PUT', `/v1/users/${colleague.id}`, { token: memberToken, body: { name: 'x' } }))
        .status,
    ).to.equal(404);
    expect(
      (await http(s.baseUrl, 'DELETE', `/v1/users/${colleague.id}`, { token: memberToken })).status,
    ).to.equal(403);
    expect(
      (
        await http(s.baseUrl, 'PUT', `/v1/users/${colleague.id}/permissions`, {
          token: memberToken,
          body: { permissions: { vpn: { write: true } } },
        })
      ).status,
    ).to.equal(403);

    // The stored state is what the owner sees.
    const seen = await http(s.baseUrl, 'GET', `/v1/users/${user.id}`, { token: owner.token });
    expect(seen.body.user).to.include({ name: 'Renamed', role: 'member', status: 'active' });
    expect(seen.body.user.permissions).to.deep.equal(['vpn:read', 'database:read', 'hosting:read']);

    // Events: created, then updated (accepted, renamed).
    const em = s.deps.db.orm.em.fork();
    const events = await em.find(
      Event,
      { organizationId: owner.organizationId },
      { orderBy: { createdAt: 'asc' } },
    );
    const mine = events.filter((e) => (e.data.object as { id?: string }).id === user.id).map((e) => e.type);
    expect(mine).to.deep.equal(['user.created', 'user.updated', 'user.login', 'user.updated']);
  });

  it('sends the invitation through the mail driver when send_invitation is true (the default)', async () => {
    const owner = await createOrg(s.deps);
    const outbox = new MemoryMailDriver();
    const previous = s.deps.mail;
    s.deps.mail = outbox;
    try {
      const email = uniqueEmail('mailed');
      const res = await http(s.baseUrl, 'POST', '/v1/users', { token: owner.token, body: { email } });
      expect(res.status).to.equal(201);
      expect(res.body.invitation_url).to.equal(null);
      expect(res.body.user).to.include({
        email,
        name: email.split('@')[0],
        status: 'invited',
        role: 'member',
      });
      expect(outbox.sent).to.have.length(1);
      const mail = outbox.sent[0]!;
      expect(mail).to.include({ to: email, kind: 'invitation' });
      const link = /(https?:\/\/\S+accept-invitation\?token=\S+)/.exec(mail.text)![1]!;
      const accepted = await http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', {
        body: { token: tokenOf(link), password: 'mailed-password' },
      });
      expect(accepted.status).to.equal(200);
    } finally {
      s.deps.mail = previous;
    }
  });

  it('lists with paging and exact filters, newest first', async () => {
    const owner = await createOrg(s.deps);
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const m1 = await createUser(s.deps, owner.organizationId);
    const m2 = await createUser(s.deps, owner.organizationId);
    const all = await http(s.baseUrl, 'GET', '/v1/users', { token: admin.token });
    expect(all.status).to.equal(200);
    expect(all.body).to.include({ success: true, total: 4, page: 1, limit: 20 });
    expect(all.body.users.map((u: { id: string }) => u.id)).to.deep.equal([m2.id, m1.id, admin.id, owner.id]);
    expect(all.body.users[0]).to.not.have.property('activity');

    const members = await http(s.baseUrl, 'GET', '/v1/users?role=member&limit=1&page=2', {
      token: owner.token,
    });
    expect(members.body).to.include({ total: 2, page: 2, limit: 1 });
    expect(members.body.users.map((u: { id: string }) => u.id)).to.deep.equal([m1.id]);

    const invited = await http(s.baseUrl, 'GET', '/v1/users?status=invited&unknown=1', {
      token: owner.token,
    });
    expect(invited.status).to.equal(200);
    expect(invited.body.total).to.equal(0);

    for (const q of ['page=0', 'limit=0', 'limit=101', 'page=abc', 'role=superuser', 'status=deleted']) {
      const res = await http(s.baseUrl, 'GET', `/v1/users?${q}`, { token: owner.token });
      expect(res.status, q).to.equal(400);
      expect(res.body.error.code, q).to.equal('VALIDATION_ERROR');
    }
  });

  it('refuses a string where a boolean is expected, and changes nothing', async () => {
    const owner = await createOrg(s.deps);
    const email = uniqueEmail('bool');
    const res = await http(s.baseUrl, 'POST', '/v1/users', {
      token: owner.token,
      body: { email, send_invitation: 'false' },
    });
    expect(res.status).to.equal(400);
    const list = await http(s.baseUrl, 'GET', '/v1/users', { token: owner.token });
    expect(list.body.total).to.equal(1);
  });
});
