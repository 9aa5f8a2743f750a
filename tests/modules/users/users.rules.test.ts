// Test tier: server
import { expect } from 'chai';
import { ROLE_DEFAULT_PERMISSIONS } from '../../../server/access/permissions.js';
import { User } from '../../../server/access/user.entity.js';
import { Event } from '../../../server/events/event.entity.js';
import { toAppError } from '../../../server/trpc/init.js';
import { createOrg, createUser, uniqueEmail, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';

/** The status and code a call ends with (200 when it succeeds). */
async function outcome(call: Promise<unknown> | (() => Promise<unknown>)) {
  try {
    await (typeof call === 'function' ? call() : call);
    return { status: 200, code: 'OK' };
  } catch (err) {
    const app = toAppError(err);
    return { status: app.status, code: app.code };
  }
}

const FORBIDDEN = { status: 403, code: 'FORBIDDEN' };
const NOT_FOUND = { status: 404, code: 'NOT_FOUND' };

describe('users: role rules, escalation, suspension, deletion, invitations', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  /** Everything about the organization's users that an escalation could change. */
  async function snapshot(organizationId: string) {
    const em = s.deps.db.orm.em.fork();
    const users = await em.find(User, { organization: organizationId }, { orderBy: { id: 'asc' } });
    return users.map((u) => ({
      id: u.id,
      email: u.email,
      name: u.name,
      role: u.role,
      status: u.status,
      permissions: [...u.permissions].sort(),
      org: u.organization.id,
      deleted: u.deletedAt !== null,
      profile: [u.avatarUrl, u.timezone, u.language],
    }));
  }

  async function eventsOf(organizationId: string, type: string) {
    const em = s.deps.db.orm.em.fork();
    return em.find(Event, { organizationId, type }, { orderBy: { createdAt: 'asc' } });
  }

  describe('roles', () => {
    let owner: TestUser;
    let admin: TestUser;
    let admin2: TestUser;
    let member: TestUser;
    beforeEach(async () => {
      owner = await createOrg(s.deps);
      admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      admin2 = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      member = await createUser(s.deps, owner.organizationId);
    });

    it('lets only the owner create an admin', async () => {
      const email = uniqueEmail('adm');
      const before = await snapshot(owner.organizationId);
      expect(await outcome(s.caller(admin.token).users.create({ email, role: 'admin' }))).to.deep.equal(
        FORBIDDEN,
      );
      expect(await snapshot(owner.organizationId)).to.deep.equal(before);
      const res = await s.caller(owner.token).users.create({ email, role: 'admin', send_invitation: false });
      expect(res.user).to.include({ role: 'admin', status: 'invited' });
      expect(res.user.permissions).to.have.members([...ROLE_DEFAULT_PERMISSIONS.admin]);
    });

    it('lets only the owner grant or revoke admin; changes apply on the next call with the same token', async () => {
      const before = await snapshot(owner.organizationId);
      expect(
        await outcome(s.caller(admin.token).users.update({ id: member.id, role: 'admin' })),
      ).to.deep.equal(FORBIDDEN);
      expect(
        await outcome(s.caller(admin.token).users.update({ id: admin2.id, role: 'member' })),
      ).to.deep.equal(FORBIDDEN);
      expect(await snapshot(owner.organizationId)).to.deep.equal(before);

      expect(await outcome(s.caller(member.token).users.list({}))).to.deep.equal(FORBIDDEN);
      const promoted = await s.caller(owner.token).users.update({ id: member.id, role: 'admin' });
      expect(promoted.user.role).to.equal('admin');
      expect(promoted.user.permissions).to.have.members([...ROLE_DEFAULT_PERMISSIONS.admin]);
      expect((await s.caller(member.token).users.list({})).total).to.equal(4);

      const demoted = await s.caller(owner.token).users.update({ id: admin.id, role: 'member' });
      expect(demoted.user.permissions).to.deep.equal([...ROLE_DEFAULT_PERMISSIONS.member]);
      expect(await outcome(s.caller(admin.token).users.list({}))).to.deep.equal(FORBIDDEN);
      expect(await outcome(s.caller(admin.token).users.get({ id: member.id }))).to.deep.equal(NOT_FOUND);
    });

    it('keeps the owner out of reach: no role, status or other change, no deletion, no second owner', async () => {
      const before = await snapshot(owner.organizationId);
      const attempts: [TestUser, () => Promise<unknown>][] = [
        [admin, () => s.caller(admin.token).users.update({ id: owner.id, role: 'member' })],
        [admin, () => s.caller(admin.token).users.update({ id: owner.id, status: 'suspended' })],
        [admin, () => s.caller(admin.token).users.update({ id: owner.id, name: 'Not the owner' })],
        [
          admin,
          () =>
            s
              .caller(admin.token)
              .users.updatePermissions({ id: owner.id, permissions: { vpn: { read: false } } }),
        ],
        [admin, () => s.caller(admin.token).users.delete({ id: owner.id })],
        [owner, () => s.caller(owner.token).users.update({ id: owner.id, role: 'admin' })],
        [owner, () => s.caller(owner.token).users.update({ id: owner.id, status: 'suspended' })],
        [owner, () => s.caller(owner.token).users.delete({ id: owner.id })],
      ];
      for (const [, attempt] of attempts) expect(await outcome(attempt)).to.deep.equal(FORBIDDEN);
      // `owner` is not a role these operations take (their enums are admin and member): invalid input.
      const giveOwner = [
        () => s.caller(owner.token).users.update({ id: member.id, role: 'owner' as 'admin' }),
        () => s.caller(owner.token).users.create({ email: uniqueEmail(), role: 'owner' as 'admin' }),
      ];
      for (const attempt of giveOwner)
        expect(await outcome(attempt)).to.deep.equal({ status: 400, code: 'VALIDATION_ERROR' });
      expect(await snapshot(owner.organizationId)).to.deep.equal(before);
      // The owner may still rename themselves.
      const renamed = await s.caller(owner.token).users.update({ id: owner.id, name: 'Owner Renamed' });
      expect(renamed.user).to.include({ name: 'Owner Renamed', role: 'owner' });
    });

    it('keeps admins from managing admins, and everyone from deleting themselves', async () => {
      const before = await snapshot(owner.organizationId);
      for (const attempt of [
        () => s.caller(admin.token).users.update({ id: admin2.id, status: 'suspended' }),
        () => s.caller(admin.token).users.update({ id: admin2.id, permissions: [] }),
        () =>
          s
            .caller(admin.token)
            .users.updatePermissions({ id: admin2.id, permissions: { vpn: { write: false } } }),
        () => s.caller(admin.token).users.delete({ id: admin2.id }),
        () => s.caller(admin.token).users.delete({ id: admin.id }),
        () =>
          s
            .caller(admin.token)
            .users.updatePermissions({ id: admin.id, permissions: { billing: { write: true } } }),
      ]) {
        expect(await outcome(attempt)).to.deep.equal(FORBIDDEN);
      }
      expect(await snapshot(owner.organizationId)).to.deep.equal(before);
    });

    it('refuses to grant what the caller does not hold (an admin and billing:write), in both forms', async () => {
      const before = await snapshot(owner.organizationId);
      for (const attempt of [
        () =>
          s.caller(admin.token).users.update({ id: member.id, permissions: ['vpn:read', 'billing:write'] }),
        () => s.caller(admin.token).users.update({ id: member.id, permissions: ['billing:admin'] }),
        () =>
          s
            .caller(admin.token)
            .users.updatePermissions({ id: member.id, permissions: { billing: { write: true } } }),
        () => s.caller(admin.token).users.create({ email: uniqueEmail(), permissions: ['billing:write'] }),
      ]) {
        expect(await outcome(attempt)).to.deep.equal(FORBIDDEN);
      }
      expect(await snapshot(owner.organizationId)).to.deep.equal(before);
      const granted = await s.caller(owner.token).users.updatePermissions({
        id: member.id,
        permissions: { billing: { read: true, write: true } },
      });
      expect(granted.permissions.billing).to.deep.equal({ read: true, write: true });
      // An admin may leave a grant it does not hold in place while changing something else.
      const kept = await s.caller(admin.token).users.updatePermissions({
        id: member.id,
        permissions: { vpn: { write: true } },
      });
      expect(kept.permissions).to.deep.include({
        billing: { read: true, write: true },
        vpn: { read: true, write: true, delete: false },
      });
    });

    it('edits one stored set through both forms, emitting user.updated', async () => {
      const c = s.caller(admin.token);
      await c.users.update({ id: member.id, permissions: ['vpn:admin', 'hosting:read', 'users:read'] });
      const object = await c.users.getPermissions({ id: member.id });
      expect(object.permissions).to.deep.equal({
        vpn: { read: true, write: true, delete: true },
        database: { read: false, write: false, delete: false },
        hosting: { read: true, write: false, delete: false },
        billing: { read: false, write: false },
      });
      // Writing back what was read changes nothing.
      await c.users.updatePermissions({ id: member.id, permissions: object.permissions });
      const strings = (await c.users.get({ id: member.id })).user.permissions;
      expect(strings).to.deep.equal([
        'vpn:read',
        'vpn:write',
        'vpn:delete',
        'vpn:admin',
        'hosting:read',
        'users:read',
      ]);
      await c.users.update({ id: member.id, permissions: strings });
      expect((await c.users.get({ id: member.id })).user.permissions).to.deep.equal(strings);

      // The object form replaces what it shows: a read-only member loses hosting entirely.
      const full = {
        vpn: { read: true, write: false, delete: false },
        database: { read: false, write: false, delete: false },
        hosting: { read: false, write: false, delete: false },
        billing: { read: false, write: false },
      };
      const put = await c.users.updatePermissions({ id: member.id, permissions: full });
      expect(put.permissions).to.deep.equal(full);
      expect((await c.users.getPermissions({ id: member.id })).permissions).to.deep.equal(full);
      expect((await c.users.get({ id: member.id })).user.permissions).to.deep.equal([
        'vpn:read',
        'users:read',
      ]);
      // And the member's next call uses the new set: without users:read they see only themselves.
      expect(await outcome(s.caller(member.token).users.getPermissions({ id: owner.id }))).to.deep.equal({
        status: 200,
        code: 'OK',
      });
      await c.users.update({ id: member.id, permissions: ['vpn:read'] });
      expect(await outcome(s.caller(member.token).users.getPermissions({ id: owner.id }))).to.deep.equal(
        NOT_FOUND,
      );

      const updates = await eventsOf(owner.organizationId, 'user.updated');
      expect(updates.length).to.equal(3); // the two no-op writes emitted nothing
    });

    it('refuses every escalation a member can send, over HTTP, and nothing changes', async () => {
      const before = await snapshot(owner.organizationId);
      const t = member.token;
      const attempts: [string, string, unknown][] = [
        ['POST', '/v1/users', { email: uniqueEmail(), role: 'admin' }],
        ['POST', '/v1/users', { email: uniqueEmail(), organization_id: 'org_x' }],
        ['PUT', `/v1/users/${member.id}`, { role: 'admin' }],
        ['PUT', `/v1/users/${member.id}`, { role: 'member' }],
        ['PUT', `/v1/users/${member.id}`, { permissions: ['users:admin'] }],
        ['PUT', `/v1/users/${member.id}`, { permissions: ['vpn:read', 'database:read', 'hosting:read'] }],
        ['PUT', `/v1/users/${member.id}`, { status: 'active' }],
        ['PUT', `/v1/users/${member.id}`, { organization_id: 'org_x', name: 'x' }],
        ['PUT', `/v1/users/${member.id}`, { id: admin.id, name: 'x' }],
        ['PUT', `/v1/users/${member.id}`, { owner: true }],
        ['PUT', `/v1/users/${admin.id}`, { name: 'x' }],
        ['PUT', `/v1/users/${member.id}/permissions`, { permissions: { vpn: { write: true } } }],
        ['PUT', `/v1/users/${member.id}/permissions`, { id: admin.id, permissions: {} }],
        ['DELETE', `/v1/users/${admin.id}`, undefined],
        ['PUT', `/v1/users/${owner.id}`, { role: 'member' }],
      ];
      for (const [method, path, body] of attempts) {
        const res = await http(s.baseUrl, method, path, { token: t, body });
        expect(res.status, `${method} ${path} ${JSON.stringify(body)}`).to.be.oneOf([400, 403, 404]);
        expect(res.body.success).to.equal(false);
      }
      expect(await snapshot(owner.organizationId)).to.deep.equal(before);
    });
  });

  describe('suspension', () => {
    it('refuses a suspended user’s tokens from the next call, and lets them back in with a new login', async () => {
      const owner = await createOrg(s.deps);
      const member = await createUser(s.deps, owner.organizationId);
      expect((await s.caller(member.token).auth.me()).user.id).to.equal(member.id);
      const res = await s.caller(owner.token).users.update({ id: member.id, status: 'suspended' });
      expect(res.user.status).to.equal('suspended');
      expect(await outcome(s.caller(member.token).auth.me())).to.deep.equal({
        status: 401,
        code: 'UNAUTHORIZED',
      });
      const login = await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: member.email, password: member.password },
      });
      expect(login.status).to.equal(401);

      await s.caller(owner.token).users.update({ id: member.id, status: 'active' });
      // The old sessions stay revoked; a new login works.
      expect(await outcome(s.caller(member.token).auth.me())).to.deep.equal({
        status: 401,
        code: 'UNAUTHORIZED',
      });
      const again = await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: member.email, password: member.password },
      });
      expect(again.status).to.equal(200);
    });

    it('does not activate an invited user by status (409)', async () => {
      const owner = await createOrg(s.deps);
      const { user } = await s
        .caller(owner.token)
        .users.create({ email: uniqueEmail(), send_invitation: false });
      expect(
        await outcome(s.caller(owner.token).users.update({ id: user.id, status: 'active' })),
      ).to.deep.equal({
        status: 409,
        code: 'CONFLICT',
      });
    });
  });

  describe('deletion', () => {
    let unregister: (() => void) | undefined;
    before(async () => {
      await s.deps.db.orm.em
        .fork()
        .execute(
          'create table if not exists "test_owned_things" ("id" varchar(64) primary key, "organization_id" varchar(64) not null, "user_id" varchar(64) not null)',
        );
    });
    // The table has no entity: left behind, it would show in the schema diff of a later test on the shared database.
    after(async () => {
      await s.deps.db.orm.em.fork().execute('drop table if exists "test_owned_things"');
    });
    afterEach(() => {
      unregister?.();
      unregister = undefined;
    });

    async function ownThings(user: TestUser, n: number): Promise<void> {
      const em = s.deps.db.orm.em.fork();
      for (let i = 0; i < n; i++) {
        await em.execute('insert into "test_owned_things" values (?, ?, ?)', [
          `thing_${user.id}_${i}`,
          user.organizationId,
          user.id,
        ]);
      }
    }
    async function ownersOfThings(organizationId: string): Promise<string[]> {
      const rows = await s.deps.db.orm.em
        .fork()
        .execute<{ user_id: string }[]>('select user_id from "test_owned_things" where organization_id = ?', [
          organizationId,
        ]);
      return rows.map((r) => r.user_id);
    }

    it('transfers resources to the caller, revokes tokens, frees the email; a second delete is 404', async () => {
      unregister = s.deps.registry.ownedResources.register({
        table: 'test_owned_things',
        activity: 'databases_created',
      });
      const owner = await createOrg(s.deps);
      const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const member = await createUser(s.deps, owner.organizationId);
      await ownThings(member, 2);
      expect(
        (await s.caller(admin.token).users.get({ id: member.id })).user.activity.databases_created,
      ).to.equal(2);

      const res = await http(s.baseUrl, 'DELETE', `/v1/users/${member.id}`, { token: admin.token });
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({
        success: true,
        message: res.body.message,
        id: member.id,
        email: member.email,
        resources_transferred_to: admin.id,
      });
      expect(res.body.message).to.be.a('string');
      expect(await ownersOfThings(owner.organizationId)).to.deep.equal([admin.id, admin.id]);
      expect(
        (await s.caller(admin.token).users.get({ id: admin.id })).user.activity.databases_created,
      ).to.equal(2);

      expect(await outcome(s.caller(member.token).auth.me())).to.deep.equal({
        status: 401,
        code: 'UNAUTHORIZED',
      });
      const refresh = await http(s.baseUrl, 'POST', '/v1/auth/refresh', {
        body: { refresh_token: member.refreshToken },
      });
      expect(refresh.status).to.equal(401);
      expect(
        (await http(s.baseUrl, 'DELETE', `/v1/users/${member.id}`, { token: admin.token })).status,
      ).to.equal(404);
      expect(
        (await http(s.baseUrl, 'GET', `/v1/users/${member.id}`, { token: admin.token })).status,
      ).to.equal(404);
      const list = await s.caller(admin.token).users.list({});
      expect(list.users.map((u) => u.id)).to.not.include(member.id);

      const deleted = await eventsOf(owner.organizationId, 'user.deleted');
      expect(deleted.map((e) => (e.data.object as { id: string }).id)).to.deep.equal([member.id]);

      // The email can be invited again: a new user with a new id.
      const again = await s.caller(admin.token).users.create({ email: member.email, send_invitation: false });
      expect(again.user.id).to.not.equal(member.id);
      expect(again.user.status).to.equal('invited');
    });

    it('moves the deleted member’s VPN connections to the caller and counts them as activity', async () => {
      const owner = await createOrg(s.deps);
      const member = await createUser(s.deps, owner.organizationId, { permissions: ['vpn:write'] });
      const { connection } = await s
        .caller(member.token)
        .vpn.connections.create({ name: 'Laptop', location: 'eu-west', protocol: 'wireguard' });
      const seen = await s.caller(owner.token).users.get({ id: member.id });
      expect(seen.user.activity.vpn_connections).to.equal(1);
      expect(
        (await s.caller(owner.token).users.get({ id: owner.id })).user.activity.vpn_connections,
      ).to.equal(0);

      const res = await s.caller(owner.token).users.delete({ id: member.id });
      expect(res.resources_transferred_to).to.equal(owner.id);
      const mine = await s.caller(owner.token).vpn.connections.list({});
      expect(mine.connections.map((c) => c.id)).to.deep.equal([connection.id]);
      expect(
        (await s.caller(owner.token).users.get({ id: owner.id })).user.activity.vpn_connections,
      ).to.equal(1);
    });

    it('rolls everything back when a transfer fails', async () => {
      unregister = s.deps.registry.ownedResources.register({
        table: 'test_owned_things',
        afterTransfer: async () => {
          throw new Error('transfer failed');
        },
      });
      const owner = await createOrg(s.deps);
      const member = await createUser(s.deps, owner.organizationId);
      await ownThings(member, 1);
      const before = await snapshot(owner.organizationId);
      const res = await http(s.baseUrl, 'DELETE', `/v1/users/${member.id}`, { token: owner.token });
      expect(res.status).to.equal(500);
      expect(res.text).to.not.include('transfer failed');
      expect(await snapshot(owner.organizationId)).to.deep.equal(before);
      expect(await ownersOfThings(owner.organizationId)).to.deep.equal([member.id]);
      expect((await s.caller(member.token).auth.me()).user.id).to.equal(member.id);
      expect(await eventsOf(owner.organizationId, 'user.deleted')).to.have.length(0);
    });

    it('lets a deleted user’s email sign up again', async () => {
      const owner = await createOrg(s.deps);
      const member = await createUser(s.deps, owner.organizationId);
      await s.caller(owner.token).users.delete({ id: member.id });
      const res = await http(s.baseUrl, 'POST', '/v1/auth/register', {
        body: {
          email: member.email,
          password: 'fresh-password',
          name: 'Again',
          organization_name: 'New Org',
        },
      });
      expect(res.status).to.equal(201);
      expect(res.body.user.id).to.not.equal(member.id);
    });

    it('revokes a pending invitation of a deleted user', async () => {
      const owner = await createOrg(s.deps);
      const created = await s
        .caller(owner.token)
        .users.create({ email: uniqueEmail(), send_invitation: false });
      await s.caller(owner.token).users.delete({ id: created.user.id });
      const token = new URL(created.invitation_url!).searchParams.get('token')!;
      const res = await http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', {
        body: { token, password: 'whatever-password' },
      });
      expect(res.status).to.equal(401);
    });
  });

  describe('invitations', () => {
    it('expires after 7 days', async () => {
      const owner = await createOrg(s.deps);
      const created = await s
        .caller(owner.token)
        .users.create({ email: uniqueEmail(), send_invitation: false });
      const token = new URL(created.invitation_url!).searchParams.get('token')!;
      const em = s.deps.db.orm.em.fork();
      const [row] = await em.execute<{ created_at: Date; expires_at: Date; token_hash: string }[]>(
        'select created_at, expires_at, token_hash from user_invitations where user_id = ?',
        [created.user.id],
      );
      expect(new Date(row!.expires_at).getTime() - new Date(row!.created_at).getTime()).to.be.closeTo(
        7 * 86_400_000,
        5_000,
      );
      expect(row!.token_hash).to.match(/^[0-9a-f]{64}$/);
      expect(row!.token_hash).to.not.equal(token);
      await em.execute(
        `update user_invitations set expires_at = now() - interval '1 second' where user_id = ?`,
        [created.user.id],
      );
      const res = await http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', {
        body: { token, password: 'late-password' },
      });
      expect(res.status).to.equal(401);
      expect(res.body.error.code).to.equal('INVALID_CREDENTIALS');
      const user = await em.findOneOrFail(User, created.user.id, { refresh: true });
      expect(user.status).to.equal('invited');
    });

    it('activates exactly once under concurrent accepts', async () => {
      const owner = await createOrg(s.deps);
      const created = await s
        .caller(owner.token)
        .users.create({ email: uniqueEmail(), send_invitation: false });
      const token = new URL(created.invitation_url!).searchParams.get('token')!;
      const results = await Promise.all(
        [1, 2, 3].map((i) =>
          http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', {
            body: { token, password: `password-${i}` },
          }),
        ),
      );
      expect(results.map((r) => r.status).sort()).to.deep.equal([200, 401, 401]);
    });

    it('validates the input and refuses duplicates of any letter case', async () => {
      const owner = await createOrg(s.deps);
      const member = await createUser(s.deps, owner.organizationId);
      const dup = await http(s.baseUrl, 'POST', '/v1/users', {
        token: owner.token,
        body: { email: member.email.toUpperCase() },
      });
      expect(dup.status).to.equal(409);
      expect(dup.body.error.code).to.equal('CONFLICT');
      for (const body of [
        {},
        { email: 'not-an-email' },
        { email: uniqueEmail(), role: 'superuser' },
        { email: uniqueEmail(), permissions: ['vpn:fly'] },
        { email: uniqueEmail(), send_invitation: 1 },
        { email: uniqueEmail(), status: 'active' },
        { email: uniqueEmail(), id: 'usr_mine' },
      ]) {
        const res = await http(s.baseUrl, 'POST', '/v1/users', { token: owner.token, body });
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error.code).to.equal('VALIDATION_ERROR');
      }
      for (const body of [
        { token: 'x' },
        { token: 'x', password: 'short' },
        { token: 'x', password: 'p'.repeat(73) },
      ]) {
        const res = await http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', { body });
        expect(res.status, JSON.stringify(body)).to.equal(400);
      }
      const unknown = await http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', {
        body: { token: 'uit_unknown', password: 'long-enough-password' },
      });
      expect(unknown.status).to.equal(401);
    });
  });

  describe('profile', () => {
    it('validates avatar_url, timezone (IANA) and language, and resets with null', async () => {
      const owner = await createOrg(s.deps);
      const c = s.caller(owner.token);
      const ok = await c.users.update({
        id: owner.id,
        profile: {
          avatar_url: 'https://cdn.example.com/a.png',
          timezone: 'America/Argentina/Buenos_Aires',
          language: 'pt-br',
        },
      });
      expect(ok.user.profile).to.deep.equal({
        avatar_url: 'https://cdn.example.com/a.png',
        timezone: 'America/Argentina/Buenos_Aires',
        language: 'pt-BR',
      });
      for (const profile of [
        { avatar_url: 'not a url' },
        { avatar_url: 'javascript:alert(1)' },
        { timezone: 'Mars/Olympus_Mons' },
        { timezone: '+01:00' },
        { language: 'not a language tag' },
        { colour: 'blue' },
      ]) {
        const res = await http(s.baseUrl, 'PUT', `/v1/users/${owner.id}`, {
          token: owner.token,
          body: { profile },
        });
        expect(res.status, JSON.stringify(profile)).to.equal(400);
      }
      const reset = await c.users.update({
        id: owner.id,
        profile: { avatar_url: null, timezone: null, language: null },
      });
      expect(reset.user.profile).to.deep.equal({ avatar_url: null, timezone: 'UTC', language: 'en' });
    });
  });

  describe('activity', () => {
    it('counts the user’s API calls of the last 30 days', async () => {
      const owner = await createOrg(s.deps);
      const member = await createUser(s.deps, owner.organizationId);
      const before = (await s.caller(owner.token).users.get({ id: member.id })).user.activity.api_calls_30d;
      for (let i = 0; i < 3; i++) await s.caller(member.token).auth.me();
      const after = (await s.caller(owner.token).users.get({ id: member.id })).user.activity;
      expect(after.api_calls_30d).to.equal(before + 3);
      expect(after).to.include({ vpn_connections: 0 });
    });
  });
});
