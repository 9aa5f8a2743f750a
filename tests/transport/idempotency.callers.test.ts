// Test tier: server
import { expect } from 'chai';
import { createOrg, createUser, type TestUser } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { countConnections } from '../modules/vpn/vpn-helpers.js';
import { createDatabase } from '../modules/databases/databases-helpers.js';

let seq = 0;
const newKey = () => `callers-${Date.now()}-${++seq}`;

function post(s: TestServer, token: string, path: string, body: unknown, key: string) {
  return http(s.baseUrl, 'POST', path, { token, body, headers: { 'idempotency-key': key } });
}

async function auditCount(s: TestServer, actorId: string, action: string): Promise<number> {
  const [row] = await s.deps.db.orm.em
    .fork()
    .execute<{ n: string | number }[]>(
      'select count(*) as n from audit_logs where actor_id = ? and action = ?',
      [actorId, action],
    );
  return Number(row!.n);
}

/** What the database holds of the records kept under `key` (every caller's). */
async function storedBodies(s: TestServer, organizationId: string, key: string): Promise<string[]> {
  const rows = await s.deps.db.orm.em
    .fork()
    .execute<{ body: string }[]>(
      'select body from idempotency_records where organization_id = ? and key = ?',
      [organizationId, key],
    );
  return rows.map((r) => r.body);
}

/**
 * A kept answer belongs to the caller that got it (docs/api-conventions.md, "Idempotency"): the same key and body sent by another user
 * or API key of the organization is a request of its own, checked and audited as any other.
 */
describe('Idempotency-Key: kept answers are the caller’s own', function () {
  this.timeout(60_000);
  let s: TestServer;
  let owner: TestUser;

  before(async () => {
    s = await sharedServer();
    owner = await createOrg(s.deps, { plan: 'enterprise' });
  });

  it('a member replaying the owner’s reset-password gets their own 404, never the new password', async () => {
    const member = await createUser(s.deps, owner.organizationId, {
      role: 'member',
      permissions: ['database:write'],
    });
    const created = await createDatabase(s.baseUrl, owner.token);
    expect(created.status).to.equal(201);
    const path = `/v1/databases/${created.body.database.id}/reset-password`;
    const k = newKey();
    const first = await post(s, owner.token, path, {}, k);
    expect(first.status).to.equal(200);
    const password: string = first.body.password;

    const replayed = await post(s, member.token, path, {}, k);
    expect(replayed.status).to.equal(404);
    expect(replayed.body.error.code).to.equal('NOT_FOUND');
    expect(replayed.headers.get('idempotent-replayed')).to.equal(null);
    expect(replayed.text).to.not.include(password);

    // The owner's own repeat is still the replay of the first answer.
    const again = await post(s, owner.token, path, {}, k);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body.password).to.equal(password);

    // The password is not stored in clear with the answer.
    const bodies = await storedBodies(s, owner.organizationId, k);
    expect(bodies).to.have.length(2); // the owner's 200 and the member's own 404
    for (const b of bodies) expect(b).to.not.include(password);
  });

  it('a member sending an admin’s key of POST /auth/2fa/setup gets a secret of their own, audited', async () => {
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const member = await createUser(s.deps, owner.organizationId, { role: 'member' });
    const k = newKey();
    const first = await post(s, admin.token, '/v1/auth/2fa/setup', {}, k);
    expect(first.status).to.equal(200);

    const other = await post(s, member.token, '/v1/auth/2fa/setup', {}, k);
    expect(other.status).to.equal(200);
    expect(other.headers.get('idempotent-replayed')).to.equal(null);
    expect(other.body.secret).to.not.equal(first.body.secret);
    expect(other.body.otpauth_url).to.include(encodeURIComponent(member.email));
    expect(await auditCount(s, member.id, 'auth.twoFactor.setup')).to.equal(1);

    const mine = await post(s, admin.token, '/v1/auth/2fa/setup', {}, k);
    expect(mine.headers.get('idempotent-replayed')).to.equal('true');
    expect(mine.body.secret).to.equal(first.body.secret);
    for (const b of await storedBodies(s, owner.organizationId, k)) {
      expect(b).to.not.include(first.body.secret);
      expect(b).to.not.include(other.body.secret);
    }
  });

  it('an admin sending the owner’s key of POST /api-keys {billing:write} is refused (403), gets no key', async () => {
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const k = newKey();
    const body = { name: 'billing', permissions: ['billing:write'] };
    const first = await post(s, owner.token, '/v1/api-keys', body, k);
    expect(first.status).to.equal(201);
    const secret: string = first.body.secret;

    const other = await post(s, admin.token, '/v1/api-keys', body, k);
    expect(other.status).to.equal(403);
    expect(other.body.error.code).to.equal('FORBIDDEN');
    expect(other.headers.get('idempotent-replayed')).to.equal(null);
    expect(other.text).to.not.include(secret);
    const [stored] = await storedBodies(s, owner.organizationId, k);
    expect(stored).to.not.include(secret);
  });

  it('a key kept for one user’s 404 does not turn a colleague’s later request into a no-op', async () => {
    const member = await createUser(s.deps, owner.organizationId, {
      role: 'member',
      permissions: ['database:write'],
    });
    const created = await createDatabase(s.baseUrl, owner.token);
    const path = `/v1/databases/${created.body.database.id}/reset-password`;
    const k = newKey();
    // The member guesses the key the owner will use: their own request is a 404, kept for them.
    expect((await post(s, member.token, path, {}, k)).status).to.equal(404);
    expect((await post(s, member.token, path, {}, k)).headers.get('idempotent-replayed')).to.equal('true');
    const ownerCall = await post(s, owner.token, path, {}, k);
    expect(ownerCall.status).to.equal(200);
    expect(ownerCall.headers.get('idempotent-replayed')).to.equal(null);
    expect(ownerCall.body.password).to.be.a('string');
  });

  it('another caller’s use of the key with another body is a fresh request, not 422', async () => {
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const org = await createOrg(s.deps, { plan: 'enterprise' });
    const colleague = await createUser(s.deps, org.organizationId, { role: 'admin' });
    const k = newKey();
    const vpn = { name: 'Laptop', location: 'eu-central', protocol: 'wireguard' };
    expect((await post(s, org.token, '/v1/vpn/connections', vpn, k)).status).to.equal(201);
    const res = await post(s, colleague.token, '/v1/vpn/connections', { ...vpn, name: 'Desktop' }, k);
    expect(res.status).to.equal(201);
    expect(res.headers.get('idempotent-replayed')).to.equal(null);
    expect(res.body.connection.name).to.equal('Desktop');
    expect(await countConnections(s.deps, org.organizationId)).to.equal(2);
    // Unrelated organization, unrelated user: still unaffected.
    expect((await post(s, admin.token, '/v1/vpn/connections', vpn, k)).status).to.equal(201);
  });

  it('an API key is a caller of its own, apart from the user who created it', async () => {
    const org = await createOrg(s.deps, { plan: 'enterprise' });
    const created = await http(s.baseUrl, 'POST', '/v1/api-keys', {
      token: org.token,
      body: { name: 'w', permissions: ['vpn:read', 'vpn:write'] },
    });
    const secret: string = created.body.secret;
    const k = newKey();
    const vpn = { name: 'Laptop', location: 'eu-central', protocol: 'wireguard' };
    const byKey = await post(s, secret, '/v1/vpn/connections', vpn, k);
    expect(byKey.status).to.equal(201);
    const byUser = await post(s, org.token, '/v1/vpn/connections', vpn, k);
    expect(byUser.status).to.equal(201);
    expect(byUser.headers.get('idempotent-replayed')).to.equal(null);
    expect(byUser.body.connection.id).to.not.equal(byKey.body.connection.id);
    const replay = await post(s, secret, '/v1/vpn/connections', vpn, k);
    expect(replay.headers.get('idempotent-replayed')).to.equal('true');
    expect(replay.body.connection.id).to.equal(byKey.body.connection.id);
  });
});
