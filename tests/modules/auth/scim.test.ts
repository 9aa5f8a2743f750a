// Test tier: server
import { expect } from 'chai';
import { Organization } from '../../../server/access/organization.entity.js';
import { User } from '../../../server/access/user.entity.js';
import { Event } from '../../../server/events/event.entity.js';
import { sha256Hex } from '../../../server/lib/crypto.js';
import { newId } from '../../../server/lib/ids.js';
import { createOrg, createUser, uniqueEmail, type TestUser } from '../../support/factories.js';
import { http, type HttpResult } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/**
 * SCIM 2.0 provisioning over HTTP (docs/sso.md, "SCIM provisioning"): the owner's token, the discovery endpoints,
 * and the request sequences Okta and Microsoft Entra ID document for their provisioning, with their bodies as those
 * identity providers send them; a suspension ending the user's sessions at once; events and audit entries as through
 * /v1/users; the owner read-only; two organizations kept apart.
 */

const USER = 'urn:ietf:params:scim:schemas:core:2.0:User';
const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const ERROR = 'urn:ietf:params:scim:api:messages:2.0:Error';
const LIST = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';

describe('SCIM 2.0 provisioning: /scim/v2 and POST /v1/organization/scim-token', function () {
  this.timeout(120_000);
  let s: TestServer;

  before(async () => {
    s = await startTestServer();
  });
  after(async () => {
    await s?.close();
  });

  const v1 = (method: string, path: string, token: string, body?: unknown) =>
    http(s.baseUrl, method, `/v1${path}`, { token, ...(body === undefined ? {} : { body }) });
  const newToken = async (owner: TestUser): Promise<string> => {
    const res = await v1('POST', '/organization/scim-token', owner.token);
    expect(res.status, res.text).to.equal(200);
    return res.body.scim.token as string;
  };
  /** A SCIM request as an identity provider sends it (`application/scim+json`). */
  const scim = (method: string, path: string, token: string | undefined, body?: unknown) =>
    http(s.baseUrl, method, `/scim/v2${path}`, {
      ...(token ? { token } : {}),
      ...(body === undefined ? {} : { body, headers: { 'content-type': 'application/scim+json' } }),
    });
  const filter = (f: string, extra = '') => `/Users?filter=${encodeURIComponent(f)}${extra}`;
  const expectScimError = (res: HttpResult, status: number, scimType?: string) => {
    expect(res.status, res.text).to.equal(status);
    expect(res.headers.get('content-type')).to.match(/^application\/scim\+json/);
    expect(res.body.schemas).to.deep.equal([ERROR]);
    expect(res.body.status).to.equal(String(status));
    expect(res.body.detail).to.be.a('string').and.not.equal('');
    if (scimType) expect(res.body.scimType).to.equal(scimType);
  };
  const enterprise = async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    return { owner, token: await newToken(owner) };
  };
  /** The organization's events of `type`, but those of its registration (the owner's user.created). */
  const events = async (organizationId: string, type: string) =>
    (await s.deps.db.orm.em.fork().find(Event, { organizationId, type }, { orderBy: { seq: 'asc' } })).filter(
      (e) => !(type === 'user.created' && (e.data.object as { role?: string }).role === 'owner'),
    );
  const audit = (organizationId: string, like: string) =>
    s.deps.db.orm.em
      .fork()
      .execute<
        { action: string; actor_type: string; actor_id: string; target_id: string | null; status: number }[]
      >(
        `select action, actor_type, actor_id, target_id, status from audit_logs where organization_id = ? and action like ? order by created_at, id`,
        [organizationId, like],
      );
  const userRow = (id: string) =>
    s.deps.db.orm.em.fork().findOneOrFail(User, id, { populate: ['passwordHash'] });

  describe('the token', () => {
    it('is the owner’s on Enterprise, shown once, stored hashed, audited, with organization.updated', async () => {
      const owner = await createOrg(s.deps, { plan: 'enterprise' });
      const res = await v1('POST', '/organization/scim-token', owner.token);
      expect(res.status, res.text).to.equal(200);
      expect(res.body.scim.token).to.match(/^scim_[A-Za-z0-9_-]{40,}$/);
      expect(res.body.scim.base_url).to.equal(`${s.deps.config.publicBaseUrl}/scim/v2`);
      const rows = await s.deps.db.orm.em
        .fork()
        .execute<{ token_hash: string; created_by: string }[]>(
          'select token_hash, created_by from scim_tokens where organization_id = ?',
          [owner.organizationId],
        );
      expect(rows).to.deep.equal([{ token_hash: sha256Hex(res.body.scim.token), created_by: owner.id }]);
      expect(await events(owner.organizationId, 'organization.updated')).to.have.length(1);
      expect(await audit(owner.organizationId, 'sso.scimToken')).to.deep.equal([
        { action: 'sso.scimToken', actor_type: 'user', actor_id: owner.id, target_id: null, status: 200 },
      ]);
    });

    it('refuses admins and members (403) and plans below Enterprise (402), storing nothing', async () => {
      const owner = await createOrg(s.deps, { plan: 'enterprise' });
      const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const member = await createUser(s.deps, owner.organizationId);
      for (const u of [admin, member]) {
        const res = await v1('POST', '/organization/scim-token', u.token);
        expect(res.status, res.text).to.equal(403);
        expect(res.body.error.code).to.equal('FORBIDDEN');
      }
      const pro = await createOrg(s.deps, { plan: 'pro' });
      const res = await v1('POST', '/organization/scim-token', pro.token);
      expect(res.status, res.text).to.equal(402);
      expect(res.body.error.details).to.deep.equal([{ resource: 'sso', limit: 0, current: 0 }]);
      const count = await s.deps.db.orm.em
        .fork()
        .execute<{ n: number }[]>(
          'select count(*)::int as n from scim_tokens where organization_id in (?, ?)',
          [owner.organizationId, pro.organizationId],
        );
      expect(count[0]!.n).to.equal(0);
    });

    it('is replaced by a new one: the old token is 401 at once', async () => {
      const { owner, token: first } = await enterprise();
      expect((await scim('GET', '/Users', first)).status).to.equal(200);
      const second = await newToken(owner);
      expectScimError(await scim('GET', '/Users', first), 401);
      expect((await scim('GET', '/Users', second)).status).to.equal(200);
    });

    it('answers 401 in SCIM’s body without a token or with a wrong one', async () => {
      await enterprise();
      for (const token of [undefined, 'scim_not-a-token', 'sk_live_other']) {
        const res = await scim('GET', '/Users', token);
        expectScimError(res, 401);
        expect(res.headers.get('www-authenticate')).to.match(/^Bearer/);
      }
    });

    it('answers 403 in SCIM’s body once the organization is below Enterprise', async () => {
      const { owner, token } = await enterprise();
      await s.deps.db.orm.em.fork().nativeUpdate(Organization, { id: owner.organizationId }, { plan: 'pro' });
      expectScimError(await scim('GET', '/Users', token), 403);
      expectScimError(
        await scim('POST', '/Users', token, { schemas: [USER], userName: uniqueEmail('down') }),
        403,
      );
    });
  });

  describe('a deleted organization', () => {
    it('answers 401 to its token at once', async () => {
      const { owner, token } = await enterprise();
      const res = await v1('DELETE', '/organization', owner.token, {
        confirm: 'Test Org',
        password: owner.password,
      });
      expect(res.status, res.text).to.be.below(300);
      expectScimError(await scim('GET', '/Users', token), 401);
    });
  });

  describe('discovery', () => {
    it('serves ServiceProviderConfig, ResourceTypes and Schemas as application/scim+json', async () => {
      const { token } = await enterprise();
      const spc = await scim('GET', '/ServiceProviderConfig', token);
      expect(spc.status, spc.text).to.equal(200);
      expect(spc.headers.get('content-type')).to.match(/^application\/scim\+json/);
      expect(spc.body.patch).to.deep.equal({ supported: true });
      expect(spc.body.filter).to.deep.equal({ supported: true, maxResults: 200 });
      expect(spc.body.bulk.supported).to.equal(false);
      expect(spc.body.etag).to.deep.equal({ supported: true });
      expect(spc.body.authenticationSchemes[0].type).to.equal('oauthbearertoken');

      const types = await scim('GET', '/ResourceTypes', token);
      expect(types.body.schemas).to.deep.equal([LIST]);
      expect(types.body.Resources.map((r: { id: string }) => r.id)).to.deep.equal(['User']);
      expect((await scim('GET', '/ResourceTypes/User', token)).body.endpoint).to.equal('/Users');

      const schemas = await scim('GET', '/Schemas', token);
      expect(schemas.body.Resources.map((r: { id: string }) => r.id)).to.deep.equal([USER]);
      const userSchema = await scim('GET', `/Schemas/${USER}`, token);
      const names = userSchema.body.attributes.map((a: { name: string }) => a.name);
      expect(names).to.include.members(['userName', 'name', 'displayName', 'emails', 'active', 'externalId']);
      expectScimError(await scim('GET', '/Groups', token), 404);
    });

    it('answers a body that is not JSON in SCIM’s error body', async () => {
      const { token } = await enterprise();
      const res = await http(s.baseUrl, 'POST', '/scim/v2/Users', {
        token,
        rawBody: '{"userName":',
        headers: { 'content-type': 'application/scim+json' },
      });
      expectScimError(res, 400, 'invalidSyntax');
    });
  });

  describe('Okta’s provisioning sequence', () => {
    it('looks up, creates, reads, replaces, deactivates, reactivates and deletes a user', async () => {
      const { owner, token } = await enterprise();
      const email = uniqueEmail('okta');

      // 1. Okta checks whether the user exists.
      const lookup = await scim('GET', filter(`userName eq "${email}"`, '&startIndex=1&count=100'), token);
      expect(lookup.status, lookup.text).to.equal(200);
      expect(lookup.body).to.deep.equal({
        schemas: [LIST],
        totalResults: 0,
        startIndex: 1,
        itemsPerPage: 0,
        Resources: [],
      });

      // 2. Okta creates it (its published body: a password and groups it also sends are not kept).
      const created = await scim('POST', '/Users', token, {
        schemas: [USER],
        userName: email,
        name: { givenName: 'Test', familyName: 'User' },
        emails: [{ primary: true, value: email, type: 'work' }],
        displayName: 'Test User',
        locale: 'en-US',
        externalId: '00ujl29u0le5T6Aj10h7',
        groups: [],
        password: '1mz050nq',
        active: true,
      });
      expect(created.status, created.text).to.equal(201);
      const id = created.body.id as string;
      expect(id).to.match(/^usr_/);
      expect(created.headers.get('location')).to.equal(`${s.deps.config.publicBaseUrl}/scim/v2/Users/${id}`);
      expect(created.headers.get('etag')).to.equal(created.body.meta.version);
      expect(created.body).to.deep.include({
        schemas: [USER],
        id,
        externalId: '00ujl29u0le5T6Aj10h7',
        userName: email,
        name: { formatted: 'Test User', givenName: 'Test', familyName: 'User' },
        displayName: 'Test User',
        emails: [{ value: email, type: 'work', primary: true }],
        active: true,
      });
      expect(created.body.meta).to.include({
        resourceType: 'User',
        location: created.headers.get('location'),
      });
      expect(Date.parse(created.body.meta.created)).to.be.a('number').and.not.NaN;
      const row = await userRow(id);
      expect(row).to.include({
        email,
        name: 'Test User',
        role: 'member',
        status: 'active',
        passwordHash: null,
      });
      const createdEvents = await events(owner.organizationId, 'user.created');
      expect(createdEvents.map((e) => (e.data.object as { id: string }).id)).to.deep.equal([id]);
      expect((createdEvents[0]!.data.object as { role: string }).role).to.equal('member');

      // 3. Okta reads it back, and finds it by its filter.
      const got = await scim('GET', `/Users/${id}`, token);
      expect(got.status).to.equal(200);
      expect(got.body).to.deep.equal(created.body);
      const found = await scim('GET', filter(`userName eq "${email.toUpperCase()}"`), token);
      expect(found.body.totalResults).to.equal(1);
      expect(found.body.Resources[0].id).to.equal(id);

      // 4. A profile change: Okta replaces the whole user (PUT).
      const replaced = await scim('PUT', `/Users/${id}`, token, {
        schemas: [USER],
        id,
        userName: email,
        name: { givenName: 'Another', familyName: 'Name' },
        emails: [{ primary: true, value: email, type: 'work' }],
        displayName: 'Another Name',
        externalId: '00ujl29u0le5T6Aj10h7',
        active: true,
      });
      expect(replaced.status, replaced.text).to.equal(200);
      expect(replaced.body.name).to.deep.equal({
        formatted: 'Another Name',
        givenName: 'Another',
        familyName: 'Name',
      });
      expect(replaced.headers.get('etag')).to.not.equal(created.headers.get('etag'));
      expect((await userRow(id)).name).to.equal('Another Name');

      // 5. Deactivation and reactivation: Okta's PATCH without a path.
      const off = await scim('PATCH', `/Users/${id}`, token, {
        schemas: [PATCH_OP],
        Operations: [{ op: 'replace', value: { active: false } }],
      });
      expect(off.status, off.text).to.equal(200);
      expect(off.body.active).to.equal(false);
      expect((await userRow(id)).status).to.equal('suspended');
      const inactive = await scim('GET', filter('active eq false'), token);
      expect(inactive.body.Resources.map((r: { id: string }) => r.id)).to.deep.equal([id]);
      const on = await scim('PATCH', `/Users/${id}`, token, {
        schemas: [PATCH_OP],
        Operations: [{ op: 'replace', value: { active: true } }],
      });
      expect(on.body.active).to.equal(true);
      expect((await userRow(id)).status).to.equal('active');
      const updates = await events(owner.organizationId, 'user.updated');
      expect(updates.map((e) => (e.data.object as { status: string }).status)).to.deep.equal([
        'active',
        'suspended',
        'active',
      ]);

      // 6. Delete.
      const gone = await scim('DELETE', `/Users/${id}`, token);
      expect(gone.status, gone.text).to.equal(204);
      expectScimError(await scim('GET', `/Users/${id}`, token), 404);
      expect((await userRow(id)).deletedAt).to.be.instanceOf(Date);
      expect(
        (await events(owner.organizationId, 'user.deleted')).map((e) => (e.data.object as { id: string }).id),
      ).to.deep.equal([id]);

      // Audited as the same changes through /v1/users, in the name of the token's owner.
      expect(await audit(owner.organizationId, 'users.%')).to.deep.equal([
        { action: 'users.create', actor_type: 'user', actor_id: owner.id, target_id: id, status: 201 },
        { action: 'users.update', actor_type: 'user', actor_id: owner.id, target_id: id, status: 200 },
        { action: 'users.update', actor_type: 'user', actor_id: owner.id, target_id: id, status: 200 },
        { action: 'users.update', actor_type: 'user', actor_id: owner.id, target_id: id, status: 200 },
        { action: 'users.delete', actor_type: 'user', actor_id: owner.id, target_id: id, status: 204 },
      ]);
    });
  });

  describe('Microsoft Entra ID’s provisioning sequence', () => {
    it('creates, finds by userName and externalId, patches with its operations, disables with "False", deletes', async () => {
      const { owner, token } = await enterprise();
      const email = uniqueEmail('entra');
      const externalId = '0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef';

      // 1. Entra's matching query, then its create (with the enterprise extension's schema).
      const none = await scim('GET', filter(`userName eq "${email}"`), token);
      expect(none.body.totalResults).to.equal(0);
      const created = await scim('POST', '/Users', token, {
        schemas: [USER, 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User'],
        externalId,
        userName: email,
        active: true,
        emails: [{ primary: true, type: 'work', value: email }],
        meta: { resourceType: 'User' },
        name: { formatted: 'givenName familyName', familyName: 'familyName', givenName: 'givenName' },
        roles: [],
      });
      expect(created.status, created.text).to.equal(201);
      const id = created.body.id as string;
      expect(created.body.displayName).to.equal('givenName familyName');

      const byExternal = await scim('GET', filter(`externalId eq "${externalId}"`), token);
      expect(byExternal.body.Resources.map((r: { id: string }) => r.id)).to.deep.equal([id]);
      const byEmail = await scim('GET', filter(`emails[type eq "work"].value eq "${email}"`), token);
      expect(byEmail.body.totalResults).to.equal(1);
      const both = await scim(
        'GET',
        filter(`userName eq "${email}" and externalId eq "${externalId}" and active eq true`),
        token,
      );
      expect(both.body.totalResults).to.equal(1);
      const neither = await scim('GET', filter(`userName eq "${email}" and externalId eq "other"`), token);
      expect(neither.body.totalResults).to.equal(0);

      // 2. Entra's attribute updates: capitalized ops, paths, the work address sent again.
      const patched = await scim('PATCH', `/Users/${id}`, token, {
        schemas: [PATCH_OP],
        Operations: [
          { op: 'Replace', path: 'emails[type eq "work"].value', value: email },
          { op: 'Replace', path: 'name.familyName', value: 'updatedFamilyName' },
          { op: 'Replace', path: 'displayName', value: 'Updated Display' },
          {
            op: 'Add',
            path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department',
            value: 'R&D',
          },
        ],
      });
      expect(patched.status, patched.text).to.equal(200);
      expect(patched.body.name.familyName).to.equal('updatedFamilyName');
      expect(patched.body.displayName).to.equal('Updated Display');
      expect((await userRow(id)).name).to.equal('Updated Display');

      // 3. Entra's disable, a string boolean; then enable.
      const disabled = await scim('PATCH', `/Users/${id}`, token, {
        schemas: [PATCH_OP],
        Operations: [{ op: 'Replace', path: 'active', value: 'False' }],
      });
      expect(disabled.status, disabled.text).to.equal(200);
      expect(disabled.body.active).to.equal(false);
      const enabled = await scim('PATCH', `/Users/${id}`, token, {
        schemas: [PATCH_OP],
        Operations: [{ op: 'Replace', path: 'active', value: true }],
      });
      expect(enabled.body.active).to.equal(true);

      // 4. A remove with a path, and an address change refused (the userName is the email).
      const removed = await scim('PATCH', `/Users/${id}`, token, {
        schemas: [PATCH_OP],
        Operations: [{ op: 'Remove', path: 'externalId' }],
      });
      expect(removed.body).to.not.have.property('externalId');
      const renamed = await scim('PATCH', `/Users/${id}`, token, {
        schemas: [PATCH_OP],
        Operations: [{ op: 'Replace', path: 'userName', value: uniqueEmail('other') }],
      });
      expectScimError(renamed, 400, 'mutability');

      // 5. Delete.
      expect((await scim('DELETE', `/Users/${id}`, token)).status).to.equal(204);
      expectScimError(await scim('DELETE', `/Users/${id}`, token), 404);
      expect(await events(owner.organizationId, 'user.deleted')).to.have.length(1);
    });
  });

  describe('suspension', () => {
    it('ends the user’s access and refresh tokens at once, and restoring lets them sign in again', async () => {
      const { owner, token } = await enterprise();
      const member = await createUser(s.deps, owner.organizationId);
      expect((await v1('GET', '/auth/me', member.token)).status).to.equal(200);
      const off = await scim('PATCH', `/Users/${member.id}`, token, {
        schemas: [PATCH_OP],
        Operations: [{ op: 'replace', value: { active: false } }],
      });
      expect(off.status, off.text).to.equal(200);
      expect((await v1('GET', '/auth/me', member.token)).status).to.equal(401);
      const refresh = await http(s.baseUrl, 'POST', '/v1/auth/refresh', {
        body: { refresh_token: member.refreshToken },
      });
      expect(refresh.status, refresh.text).to.equal(401);
      const login = () =>
        http(s.baseUrl, 'POST', '/v1/auth/login', {
          body: { email: member.email, password: member.password },
        });
      expect((await login()).status).to.not.equal(200);

      await scim('PATCH', `/Users/${member.id}`, token, {
        schemas: [PATCH_OP],
        Operations: [{ op: 'replace', path: 'active', value: 'True' }],
      });
      expect((await login()).status).to.equal(200);
      const statuses = (await events(owner.organizationId, 'user.updated')).map(
        (e) => (e.data.object as { status: string }).status,
      );
      expect(statuses).to.deep.equal(['suspended', 'active']);
    });
  });

  describe('the users listed', () => {
    it('are every user of the organization, the owner included, paged from startIndex 1', async () => {
      const { owner, token } = await enterprise();
      const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const member = await createUser(s.deps, owner.organizationId);
      const all = await scim('GET', '/Users', token);
      expect(all.body.totalResults).to.equal(3);
      expect(all.body.Resources.map((r: { id: string }) => r.id)).to.deep.equal([
        owner.id,
        admin.id,
        member.id,
      ]);
      const page = await scim('GET', '/Users?startIndex=2&count=1', token);
      expect(page.body).to.include({ totalResults: 3, startIndex: 2, itemsPerPage: 1 });
      expect(page.body.Resources[0].id).to.equal(admin.id);
      const countOnly = await scim('GET', '/Users?count=0', token);
      expect(countOnly.body).to.include({ totalResults: 3, itemsPerPage: 0 });
      const byEmail = await scim('GET', filter(`emails.value eq "${member.email}"`), token);
      expect(byEmail.body.Resources.map((r: { id: string }) => r.id)).to.deep.equal([member.id]);
      expectScimError(await scim('GET', filter('userName co "x"'), token), 400, 'invalidFilter');
      expectScimError(await scim('GET', filter('title eq "x"'), token), 400, 'invalidFilter');
    });

    it('gives created users the SSO connection’s default_role', async () => {
      const { owner, token } = await enterprise();
      const now = new Date();
      await s.deps.db.orm.em.fork().execute(
        `insert into sso_connections (id, created_at, updated_at, organization_id, protocol, idp_entity_id, idp_sso_url, idp_certificate, default_role, enforced)
         values (?, ?, ?, ?, 'saml', 'https://idp.example.test', 'https://idp.example.test/sso', 'cert', 'admin', false)`,
        [newId('sso'), now, now, owner.organizationId],
      );
      const res = await scim('POST', '/Users', token, { schemas: [USER], userName: uniqueEmail('admin') });
      expect(res.status, res.text).to.equal(201);
      expect((await userRow(res.body.id)).role).to.equal('admin');
    });
  });

  describe('refusals', () => {
    it('answers 409 uniqueness for a userName of the organization or another organization’s account', async () => {
      const { owner, token } = await enterprise();
      const email = uniqueEmail('dup');
      expect((await scim('POST', '/Users', token, { schemas: [USER], userName: email })).status).to.equal(
        201,
      );
      expectScimError(
        await scim('POST', '/Users', token, { schemas: [USER], userName: email }),
        409,
        'uniqueness',
      );
      const other = await createOrg(s.deps);
      expectScimError(
        await scim('POST', '/Users', token, { schemas: [USER], userName: other.email.toUpperCase() }),
        409,
        'uniqueness',
      );
      expect(await events(owner.organizationId, 'user.created')).to.have.length(1);
      const refused = (await audit(owner.organizationId, 'users.create')).map((e) => e.status);
      expect(refused).to.deep.equal([201, 409, 409]);
    });

    it('never changes nor deletes the owner (403), which stays listed', async () => {
      const { owner, token } = await enterprise();
      const before = await userRow(owner.id);
      const answers = [
        await scim('PATCH', `/Users/${owner.id}`, token, {
          schemas: [PATCH_OP],
          Operations: [{ op: 'replace', value: { active: false } }],
        }),
        await scim('PUT', `/Users/${owner.id}`, token, {
          schemas: [USER],
          userName: owner.email,
          active: false,
        }),
        await scim('DELETE', `/Users/${owner.id}`, token),
      ];
      for (const res of answers) expectScimError(res, 403);
      const after = await userRow(owner.id);
      expect(after).to.include({ status: 'active', name: before.name, deletedAt: null });
      expect((await v1('GET', '/auth/me', owner.token)).status).to.equal(200);
      const got = await scim('GET', `/Users/${owner.id}`, token);
      expect(got.body.active).to.equal(true);
      expect(await events(owner.organizationId, 'user.updated')).to.have.length(0);
    });

    it('keeps two organizations apart: another organization’s users are not found nor listed', async () => {
      const a = await enterprise();
      const b = await enterprise();
      const bMember = await createUser(s.deps, b.owner.organizationId);
      const listed = await scim('GET', '/Users', a.token);
      expect(listed.body.Resources.map((r: { id: string }) => r.id)).to.deep.equal([a.owner.id]);
      expect(
        (await scim('GET', filter(`userName eq "${bMember.email}"`), a.token)).body.totalResults,
      ).to.equal(0);
      expectScimError(await scim('GET', `/Users/${bMember.id}`, a.token), 404);
      expectScimError(
        await scim('PATCH', `/Users/${bMember.id}`, a.token, {
          schemas: [PATCH_OP],
          Operations: [{ op: 'replace', value: { active: false } }],
        }),
        404,
      );
      expectScimError(await scim('DELETE', `/Users/${bMember.id}`, a.token), 404);
      expect((await userRow(bMember.id)).status).to.equal('active');
      expect((await v1('GET', '/auth/me', bMember.token)).status).to.equal(200);
    });

    it('refuses a userName that is not an email address (400 invalidValue) and a PatchOp without its schema', async () => {
      const { owner, token } = await enterprise();
      expectScimError(
        await scim('POST', '/Users', token, { schemas: [USER], userName: 'jdoe' }),
        400,
        'invalidValue',
      );
      const member = await createUser(s.deps, owner.organizationId);
      expectScimError(
        await scim('PATCH', `/Users/${member.id}`, token, {
          Operations: [{ op: 'replace', value: { active: false } }],
        }),
        400,
        'invalidSyntax',
      );
      expect((await userRow(member.id)).status).to.equal('active');
    });

    it('reads application/json bodies too', async () => {
      const { token } = await enterprise();
      const res = await http(s.baseUrl, 'POST', '/scim/v2/Users', {
        token,
        body: { schemas: [USER], userName: uniqueEmail('json') },
      });
      expect(res.status, res.text).to.equal(201);
    });
  });
});
