// Test tier: server
import { expect } from 'chai';
import type { AnyTRPCProcedure } from '@trpc/server';
import { PERMISSIONS } from '../../../server/access/permissions.js';
import { sha256Hex } from '../../../server/lib/crypto.js';
import { API_KEY_PERMISSIONS } from '../../../server/modules/api-keys/api-keys.constants.js';
import { appRouter } from '../../../server/router.js';
import type { Meta } from '../../../server/trpc/init.js';
import { isClosedToApiKeys } from '../../../server/trpc/procedures.js';
import { createOrg, createUser, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, startTestServer, type TestServer } from '../../support/server.js';
import { createConnection } from '../vpn/vpn-helpers.js';

const createKey = (s: TestServer, token: string, body: Record<string, unknown>) =>
  http(s.baseUrl, 'POST', '/v1/api-keys', { token, body });

async function keyRow(s: TestServer, id: string) {
  const [row] = await s.deps.db.orm.em
    .fork()
    .execute<{ secret_hash: string; revoked_at: string | Date | null; last_used_at: string | Date | null }[]>(
      'select secret_hash, revoked_at, last_used_at from api_keys where id = ?',
      [id],
    );
  // PGlite gives dates, PostgreSQL's raw rows strings.
  const date = (v: string | Date | null) => (v === null ? null : new Date(v));
  return {
    secret_hash: row!.secret_hash,
    revoked_at: date(row!.revoked_at),
    last_used_at: date(row!.last_used_at),
  };
}

describe('API keys over HTTP', function () {
  this.timeout(60_000);
  let s: TestServer;
  let owner: TestUser;
  let admin: TestUser;

  before(async () => {
    s = await sharedServer();
    owner = await createOrg(s.deps, { plan: 'enterprise' });
    admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
  });

  it('as a new user would: create with vpn:read, list with it, refused a create, revoke, then 401', async () => {
    const created = await createKey(s, admin.token, { name: 'CI reader', permissions: ['vpn:read'] });
    expect(created.status).to.equal(201);
    const { api_key, secret } = created.body;
    expect(created.headers.get('location')).to.match(new RegExp(`/v1/api-keys/${api_key.id}$`));
    expect(secret).to.match(/^sk_[A-Za-z0-9_-]{43}$/);
    expect(api_key).to.include({ name: 'CI reader', prefix: secret.slice(0, 12), created_by: admin.id });
    expect(api_key.id).to.match(/^key_[a-z0-9]{20}$/);
    expect(api_key.permissions).to.deep.equal(['vpn:read']);
    expect(api_key.last_used_at).to.equal(null);
    // 90 days by default.
    expect(Date.parse(api_key.expires_at) - Date.parse(api_key.created_at)).to.equal(90 * 86_400_000);
    // Stored hashed only.
    expect((await keyRow(s, api_key.id)).secret_hash).to.equal(sha256Hex(secret));

    const listed = await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: secret });
    expect(listed.status).to.equal(200);
    expect(listed.body.success).to.equal(true);
    expect(listed.headers.get('ratelimit-policy')).to.match(/^"burst";q=\d+;w=10$/);

    const refused = await createConnection(s.baseUrl, secret);
    expect(refused.status).to.equal(403);
    expect(refused.body.error.code).to.equal('FORBIDDEN');

    const shown = await http(s.baseUrl, 'GET', `/v1/api-keys/${api_key.id}`, { token: admin.token });
    expect(shown.status).to.equal(200);
    expect(shown.body.api_key).to.deep.equal(api_key);
    expect(shown.text).to.not.include(secret);

    const revoked = await http(s.baseUrl, 'DELETE', `/v1/api-keys/${api_key.id}`, { token: admin.token });
    expect(revoked.status).to.equal(200);
    expect(revoked.body).to.deep.equal({ success: true, message: 'API key revoked', id: api_key.id });

    const after = await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: secret });
    expect(after.status).to.equal(401);
    expect(after.body.error.code).to.equal('UNAUTHORIZED');
    expect(after.headers.get('www-authenticate')).to.equal('Bearer');
    expect(
      (await http(s.baseUrl, 'GET', `/v1/api-keys/${api_key.id}`, { token: admin.token })).status,
    ).to.equal(404);
    expect(
      (await http(s.baseUrl, 'DELETE', `/v1/api-keys/${api_key.id}`, { token: admin.token })).status,
    ).to.equal(404);
  });

  it('lists the live keys of the organization, newest first, page by page, without secrets', async () => {
    const org = await createOrg(s.deps);
    const a = await createKey(s, org.token, { name: 'a', permissions: ['vpn:read'] });
    const b = await createKey(s, org.token, {
      name: 'b',
      permissions: ['database:read'],
      expires_in_days: 1,
    });
    const c = await createKey(s, org.token, { name: 'c', permissions: ['hosting:read'] });
    await http(s.baseUrl, 'DELETE', `/v1/api-keys/${c.body.api_key.id}`, { token: org.token });
    const page = await http(s.baseUrl, 'GET', '/v1/api-keys?limit=1&page=2', { token: org.token });
    expect(page.status).to.equal(200);
    expect(page.body).to.deep.equal({
      success: true,
      api_keys: [a.body.api_key],
      total: 2,
      page: 2,
      limit: 1,
      has_more: false,
    });
    const all = await http(s.baseUrl, 'GET', '/v1/api-keys', { token: org.token });
    expect(all.body.api_keys.map((k: { name: string }) => k.name)).to.deep.equal(['b', 'a']);
    expect(all.text).to.not.include(a.body.secret);
    // Another organization sees none of them.
    const other = await createOrg(s.deps);
    const theirs = await http(s.baseUrl, 'GET', '/v1/api-keys', { token: other.token });
    expect(theirs.body.total).to.equal(0);
    expect(
      (await http(s.baseUrl, 'GET', `/v1/api-keys/${b.body.api_key.id}`, { token: other.token })).status,
    ).to.equal(404);
  });

  it('refuses bad input with 400 and permissions the creator lacks with 403, creating nothing', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ name: '', permissions: ['vpn:read'] }, 'name'],
      [{ name: 'x', permissions: [] }, 'permissions'],
      [{ name: 'x', permissions: ['vpn:fly'] }, 'permissions.0'],
      [{ name: 'x', permissions: ['vpn:read'], expires_in_days: 0 }, 'expires_in_days'],
      [{ name: 'x', permissions: ['vpn:read'], expires_in_days: 366 }, 'expires_in_days'],
      [{ name: 'x', permissions: ['vpn:read'], secret: 'sk_mine' }, 'secret'],
    ];
    const org = await createOrg(s.deps);
    for (const [body, path] of cases) {
      const res = await createKey(s, org.token, body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.code).to.equal('VALIDATION_ERROR');
      expect(res.body.error.details.map((d: { path: string }) => d.path)).to.include(path);
    }
    // An admin does not hold billing:write unless granted.
    const orgAdmin = await createUser(s.deps, org.organizationId, { role: 'admin' });
    const over = await createKey(s, orgAdmin.token, {
      name: 'x',
      permissions: ['vpn:read', 'billing:write'],
    });
    expect(over.status).to.equal(403);
    expect(over.body.error.message).to.include('billing:write');
    // Members do not manage keys.
    const member = await createUser(s.deps, org.organizationId);
    expect((await createKey(s, member.token, { name: 'x', permissions: ['vpn:read'] })).status).to.equal(403);
    const listed = await http(s.baseUrl, 'GET', '/v1/api-keys', { token: org.token });
    expect(listed.body.total).to.equal(0);
  });

  it('refuses permissions no key can use (users:*, billing:delete, billing:admin) with 400 naming the allowed set', async () => {
    for (const permission of ['users:read', 'users:admin', 'billing:delete', 'billing:admin']) {
      const res = await createKey(s, owner.token, { name: 'x', permissions: ['vpn:read', permission] });
      expect(res.status, permission).to.equal(400);
      expect(res.body.error.code).to.equal('VALIDATION_ERROR');
      expect(res.body.error.details).to.have.length(1);
      expect(res.body.error.details[0].path).to.equal('permissions.1');
      expect(res.body.error.details[0].message).to.include(API_KEY_PERMISSIONS.join(', '));
    }
    expect((await http(s.baseUrl, 'GET', '/v1/api-keys', { token: owner.token })).body.total).to.equal(0);
    // The document lists the same set.
    const doc = (await http(s.baseUrl, 'GET', '/v1/openapi.json')).body;
    const schema = doc.paths['/api-keys'].post.requestBody.content['application/json'].schema;
    expect(schema.properties.permissions.items.enum).to.deep.equal(API_KEY_PERMISSIONS);
  });

  it('allows exactly the permissions that operations open to keys check, and `admin` where it implies only those', () => {
    const checked = new Set<string>();
    for (const [path, proc] of Object.entries(
      appRouter._def.procedures as unknown as Record<string, AnyTRPCProcedure>,
    )) {
      const meta = proc._def.meta as Meta | undefined;
      if (meta?.permission && !isClosedToApiKeys(path, meta)) checked.add(meta.permission);
    }
    // `<resource>:admin` implies read, write and delete: allowed where all three are checked.
    const adminUsable = (r: string) => ['read', 'write', 'delete'].every((l) => checked.has(`${r}:${l}`));
    const expected = PERMISSIONS.filter(
      (p) => checked.has(p) || (p.endsWith(':admin') && adminUsable(p.split(':')[0]!)),
    );
    expect([...API_KEY_PERMISSIONS]).to.deep.equal(expected);
  });

  it('is closed to /auth, /api-keys, /users, /webhooks and /audit-logs whatever it holds', async () => {
    const { secret } = (
      await createKey(s, owner.token, {
        name: 'all',
        permissions: ['vpn:admin', 'database:admin', 'hosting:admin', 'billing:read', 'billing:write'],
      })
    ).body;
    const calls: [string, string, unknown?][] = [
      ['GET', '/v1/auth/me'],
      ['POST', '/v1/auth/logout', {}],
      ['GET', '/v1/api-keys'],
      ['POST', '/v1/api-keys', { name: 'child', permissions: ['vpn:read'] }],
      ['GET', '/v1/users'],
      ['GET', '/v1/webhooks'],
      ['GET', '/v1/audit-logs'],
    ];
    for (const [method, path, body] of calls) {
      const res = await http(s.baseUrl, method, path, { token: secret, body });
      expect(res.status, `${method} ${path}`).to.equal(403);
      expect(res.body.error.code).to.equal('FORBIDDEN');
    }
    // What it holds still works.
    expect((await createConnection(s.baseUrl, secret)).status).to.equal(201);
  });

  it('acts as its creator: ownership, and never more than the creator holds now (a demotion narrows it)', async () => {
    const org = await createOrg(s.deps, { plan: 'enterprise' });
    const orgAdmin = await createUser(s.deps, org.organizationId, { role: 'admin' });
    const { secret } = (
      await createKey(s, orgAdmin.token, { name: 'ops', permissions: ['vpn:read', 'vpn:write'] })
    ).body;
    const made = await createConnection(s.baseUrl, secret);
    expect(made.status).to.equal(201);
    expect(made.body.connection.user_id ?? orgAdmin.id).to.equal(orgAdmin.id);

    // The owner makes the admin a member: members hold vpn:read by default, not vpn:write.
    const demoted = await http(s.baseUrl, 'PUT', `/v1/users/${orgAdmin.id}`, {
      token: org.token,
      body: { role: 'member' },
    });
    expect(demoted.status).to.equal(200);
    const refused = await createConnection(s.baseUrl, secret);
    expect(refused.status).to.equal(403);
    const listed = await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: secret });
    expect(listed.status).to.equal(200);
    // As a member, the creator (and so the key) sees their own connections only.
    expect(listed.body.connections.map((c: { id: string }) => c.id)).to.deep.equal([made.body.connection.id]);

    // Granted again: the key's listed permission applies again.
    await http(s.baseUrl, 'PUT', `/v1/users/${orgAdmin.id}/permissions`, {
      token: org.token,
      body: { permissions: { vpn: { write: true } } },
    });
    expect((await createConnection(s.baseUrl, secret)).status).to.equal(201);
  });

  it('is revoked when its creator is suspended or deleted', async () => {
    const org = await createOrg(s.deps, { plan: 'enterprise' });
    const a = await createUser(s.deps, org.organizationId, { role: 'admin' });
    const b = await createUser(s.deps, org.organizationId, { role: 'admin' });
    const keyA = (await createKey(s, a.token, { name: 'a', permissions: ['vpn:read'] })).body;
    const keyB = (await createKey(s, b.token, { name: 'b', permissions: ['vpn:read'] })).body;
    const list = (secret: string) => http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: secret });
    expect((await list(keyA.secret)).status).to.equal(200);

    await http(s.baseUrl, 'PUT', `/v1/users/${a.id}`, { token: org.token, body: { status: 'suspended' } });
    expect((await list(keyA.secret)).status).to.equal(401);
    expect((await keyRow(s, keyA.api_key.id)).revoked_at).to.be.instanceOf(Date);
    // Reactivating the user does not bring the key back.
    await http(s.baseUrl, 'PUT', `/v1/users/${a.id}`, { token: org.token, body: { status: 'active' } });
    expect((await list(keyA.secret)).status).to.equal(401);

    await http(s.baseUrl, 'DELETE', `/v1/users/${b.id}`, { token: org.token });
    expect((await list(keyB.secret)).status).to.equal(401);
    expect((await keyRow(s, keyB.api_key.id)).revoked_at).to.be.instanceOf(Date);
  });

  it('refuses an expired key (401), an unknown one and a forged one', async () => {
    const { api_key, secret } = (
      await createKey(s, owner.token, { name: 'short', permissions: ['vpn:read'] })
    ).body;
    await s.deps.db.orm.em
      .fork()
      .execute(`update api_keys set expires_at = now() - interval '1 second' where id = ?`, [api_key.id]);
    const expired = await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: secret });
    expect(expired.status).to.equal(401);
    expect(expired.body.error.message).to.match(/expired/);
    for (const token of [`${secret.slice(0, -1)}A`, 'sk_', 'sk_unknown']) {
      const res = await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token });
      expect(res.status).to.equal(401);
      expect(res.body.error.code).to.equal('UNAUTHORIZED');
    }
  });

  it('records last use at most once a minute, off the request path', async () => {
    const { api_key, secret } = (await createKey(s, owner.token, { name: 'used', permissions: ['vpn:read'] }))
      .body;
    await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: secret });
    // Written with the usage counters' flush, not by the request.
    await s.deps.apiUsage.flush();
    const first = (await keyRow(s, api_key.id)).last_used_at;
    expect(first).to.be.instanceOf(Date);
    await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: secret });
    await s.deps.apiUsage.flush();
    expect((await keyRow(s, api_key.id)).last_used_at).to.deep.equal(first);
    const shown = await http(s.baseUrl, 'GET', `/v1/api-keys/${api_key.id}`, { token: owner.token });
    expect(shown.body.api_key.last_used_at).to.equal(first!.toISOString());
  });

  it('works on /trpc as on /v1', async () => {
    const { secret } = (await createKey(s, owner.token, { name: 'trpc', permissions: ['vpn:read'] })).body;
    const res = await http(s.baseUrl, 'GET', '/trpc/vpn.connections.list?input=%7B%7D', { token: secret });
    expect(res.status).to.equal(200);
    const closed = await http(s.baseUrl, 'GET', '/trpc/auth.me', { token: secret });
    expect(closed.status).to.equal(403);
  });
});

describe('API keys: burst budget and quota', function () {
  this.timeout(60_000);
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ env: { RATE_LIMIT_BURST: '3' } });
  });
  after(() => s.close());

  it('has a burst budget of its own, and its calls count against the organization', async () => {
    const owner = await createOrg(s.deps);
    const { secret } = (await createKey(s, owner.token, { name: 'burst', permissions: ['vpn:read'] })).body;
    // The owner's token used 1 of its 3 (the create); the key starts with its own 3.
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      statuses.push((await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: secret })).status);
    }
    expect(statuses).to.deep.equal([200, 200, 200, 429]);
    const limited = await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: secret });
    expect(limited.body.error.code).to.equal('RATE_LIMITED');
    expect(Number(limited.headers.get('retry-after'))).to.be.greaterThan(0);
    // The owner's own budget is untouched by the key's.
    expect((await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: owner.token })).status).to.equal(
      200,
    );
    await s.deps.apiUsage.flush();
    const [row] = await s.deps.db.orm.em
      .fork()
      .execute<{ calls: string; limited: string }[]>(
        'select sum("count") as calls, sum(rate_limited) as limited from api_calls_daily where organization_id = ?',
        [owner.organizationId],
      );
    // create (token) + 3 (key) + 1 (token); two refusals of the key.
    expect(Number(row!.calls)).to.equal(5);
    expect(Number(row!.limited)).to.equal(2);
  });
});
