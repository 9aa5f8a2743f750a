// Test tier: server
import { expect } from 'chai';
import { purgeIdempotencyRecords } from '../../server/access/idempotency-record.entity.js';
import { createOrg, type TestUser } from '../support/factories.js';
import { http } from '../support/http.js';
import { usingPostgres } from '../support/env.js';
import { sharedServer, startTestServer, type TestServer } from '../support/server.js';
import { countConnections, eventsOf } from '../modules/vpn/vpn-helpers.js';
import { addCard } from '../modules/billing/billing-helpers.js';

let seq = 0;
const newKey = () => `test-${Date.now()}-${++seq}`;

const body = { name: 'Laptop', location: 'eu-central', protocol: 'wireguard' };

function post(
  s: TestServer,
  token: string,
  key: string | undefined,
  b: unknown = body,
  path = '/v1/vpn/connections',
) {
  return http(s.baseUrl, 'POST', path, {
    token,
    body: b,
    headers: key === undefined ? {} : { 'idempotency-key': key },
  });
}

async function auditCount(s: TestServer, organizationId: string, action: string): Promise<number> {
  const [row] = await s.deps.db.orm.em
    .fork()
    .execute<{ n: string | number }[]>(
      'select count(*) as n from audit_logs where organization_id = ? and action = ?',
      [organizationId, action],
    );
  return Number(row!.n);
}

describe('Idempotency-Key (docs/api-conventions.md, "Idempotency")', function () {
  this.timeout(60_000);
  let s: TestServer;

  before(async () => {
    s = await sharedServer();
  });

  describe('with an API key', () => {
    let owner: TestUser;
    let secret: string;
    before(async () => {
      owner = await createOrg(s.deps, { plan: 'enterprise' });
      const created = await http(s.baseUrl, 'POST', '/v1/api-keys', {
        token: owner.token,
        body: { name: 'writer', permissions: ['vpn:read', 'vpn:write'] },
      });
      secret = created.body.secret;
    });

    it('the same POST sent twice creates one resource; the second answer is the first, replayed', async () => {
      const org = await createOrg(s.deps, { plan: 'enterprise' });
      const { secret: key } = (
        await http(s.baseUrl, 'POST', '/v1/api-keys', {
          token: org.token,
          body: { name: 'w', permissions: ['vpn:write'] },
        })
      ).body;
      const k = newKey();
      const first = await post(s, key, k);
      expect(first.status).to.equal(201);
      expect(first.headers.get('idempotent-replayed')).to.equal(null);
      const second = await post(s, key, k);
      expect(second.status).to.equal(201);
      expect(second.headers.get('idempotent-replayed')).to.equal('true');
      expect(second.text).to.equal(first.text);
      expect(second.headers.get('location')).to.equal(first.headers.get('location'));
      expect(second.headers.get('x-request-id')).to.not.equal(first.headers.get('x-request-id'));
      expect(await countConnections(s.deps, org.organizationId)).to.equal(1);
      // Nothing happened again: one event, one audit entry.
      expect((await eventsOf(s.deps, org.organizationId, 'vpn.connected')).length).to.be.at.most(1);
      expect(await auditCount(s, org.organizationId, 'vpn.connections.create')).to.equal(1);
      // The same key with a body whose fields come in another order is the same request.
      const reordered = await post(s, key, k, {
        protocol: 'wireguard',
        location: 'eu-central',
        name: 'Laptop',
      });
      expect(reordered.headers.get('idempotent-replayed')).to.equal('true');
    });

    it('20 concurrent identical POSTs: exactly one resource, the others replays or 409', async () => {
      const org = await createOrg(s.deps, { plan: 'enterprise' });
      const { secret: key } = (
        await http(s.baseUrl, 'POST', '/v1/api-keys', {
          token: org.token,
          body: { name: 'w', permissions: ['vpn:write'] },
        })
      ).body;
      const k = newKey();
      const results = await Promise.all(Array.from({ length: 20 }, () => post(s, key, k)));
      const created = results.filter((r) => r.status === 201);
      const conflicts = results.filter((r) => r.status === 409);
      expect(created.length + conflicts.length, results.map((r) => r.status).join(',')).to.equal(20);
      expect(created.length).to.be.at.least(1);
      const ids = new Set(created.map((r) => r.body.connection.id));
      expect(ids.size).to.equal(1);
      expect(created.filter((r) => r.headers.get('idempotent-replayed') !== 'true').length).to.equal(1);
      for (const c of conflicts) expect(c.body.error.code).to.equal('CONFLICT');
      expect(await countConnections(s.deps, org.organizationId)).to.equal(1);
      // Once settled, every retry is a replay.
      const after = await post(s, key, k);
      expect(after.status).to.equal(201);
      expect(after.body.connection.id).to.equal([...ids][0]);
    });

    it('the same key with another body or path is 422 IDEMPOTENCY_KEY_REUSED (for the same caller)', async () => {
      const k = newKey();
      expect((await post(s, owner.token, k)).status).to.equal(201);
      const before = await countConnections(s.deps, owner.organizationId);
      const otherBody = await post(s, owner.token, k, { ...body, name: 'Desktop' });
      expect(otherBody.status).to.equal(422);
      expect(otherBody.body.error.code).to.equal('IDEMPOTENCY_KEY_REUSED');
      const otherPath = await http(s.baseUrl, 'POST', '/v1/databases', {
        token: owner.token,
        body: { name: 'db', engine: 'postgresql' },
        headers: { 'idempotency-key': k },
      });
      expect(otherPath.status).to.equal(422);
      expect(await countConnections(s.deps, owner.organizationId)).to.equal(before);
    });

    it('does not keep 400, 403 or 409 answers: the key can be used again', async () => {
      const k = newKey();
      const bad = await post(s, secret, k, { ...body, protocol: 'carrier-pigeon' });
      expect(bad.status).to.equal(400);
      const ok = await post(s, secret, k);
      expect(ok.status).to.equal(201);
      expect(ok.headers.get('idempotent-replayed')).to.equal(null);

      // 403: a key without vpn:write, then the same key value sent with a token that may.
      const reader = (
        await http(s.baseUrl, 'POST', '/v1/api-keys', {
          token: owner.token,
          body: { name: 'r', permissions: ['vpn:read'] },
        })
      ).body.secret;
      const k2 = newKey();
      expect((await post(s, reader, k2)).status).to.equal(403);
      const allowed = await post(s, owner.token, k2);
      expect(allowed.status).to.equal(201);
      expect(allowed.headers.get('idempotent-replayed')).to.equal(null);
    });

    it('keeps a 402 (the plan limit) and replays it with its first request_id', async () => {
      const org = await createOrg(s.deps);
      // Fill the starter plan's VPN allowance.
      for (let i = 0; ; i++) {
        const res = await post(s, org.token, undefined, { ...body, name: `c${i}` });
        if (res.status === 402) break;
        expect(res.status).to.equal(201);
      }
      const k = newKey();
      const first = await post(s, org.token, k);
      expect(first.status).to.equal(402);
      const again = await post(s, org.token, k);
      expect(again.status).to.equal(402);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(first.body);
      expect(again.body.error.request_id).to.equal(first.headers.get('x-request-id'));
      expect(again.headers.get('x-request-id')).to.not.equal(first.headers.get('x-request-id'));
    });

    it('is keyed by organization and caller: another organization may use the same key', async () => {
      const k = newKey();
      const other = await createOrg(s.deps);
      const a = await post(s, secret, k);
      const b = await post(s, other.token, k);
      expect(a.status).to.equal(201);
      expect(b.status).to.equal(201);
      expect(b.headers.get('idempotent-replayed')).to.equal(null);
      expect(b.body.connection.id).to.not.equal(a.body.connection.id);
    });

    it('a /trpc mutation with the same key and input is the same request', async () => {
      const k = newKey();
      const rest = await post(s, secret, k);
      const trpc = await http(s.baseUrl, 'POST', '/trpc/vpn.connections.create', {
        token: secret,
        body,
        headers: { 'idempotency-key': k },
      });
      expect(trpc.status).to.equal(200);
      expect(trpc.headers.get('idempotent-replayed')).to.equal('true');
      expect(trpc.body.result.data).to.deep.equal(rest.body);
    });

    it('refuses a malformed key with 400 and changes nothing', async () => {
      const before = await countConnections(s.deps, owner.organizationId);
      for (const k of ['x'.repeat(256), 'tab\there', 'é']) {
        const res = await post(s, secret, k);
        expect(res.status, JSON.stringify(k)).to.equal(400);
        expect(res.body.error.code).to.equal('VALIDATION_ERROR');
      }
      expect(await countConnections(s.deps, owner.organizationId)).to.equal(before);
    });

    it('forgets a key after 24 hours (the purge job removes the record)', async () => {
      const k = newKey();
      const first = await post(s, secret, k);
      const em = s.deps.db.orm.em.fork();
      await em.execute(
        `update idempotency_records set expires_at = now() - interval '1 second' where organization_id = ? and key = ?`,
        [owner.organizationId, k],
      );
      // Expired: not replayed even before the purge.
      const later = await post(s, secret, k);
      expect(later.status).to.equal(201);
      expect(later.body.connection.id).to.not.equal(first.body.connection.id);
      await em.execute(
        `update idempotency_records set expires_at = now() - interval '1 second' where organization_id = ? and key = ?`,
        [owner.organizationId, k],
      );
      expect(await purgeIdempotencyRecords(em, new Date())).to.be.at.least(1);
      const [row] = await em.execute<{ n: string | number }[]>(
        'select count(*) as n from idempotency_records where organization_id = ? and key = ?',
        [owner.organizationId, k],
      );
      expect(Number(row!.n)).to.equal(0);
    });
  });

  it('several processes on one PostgreSQL database: one resource for concurrent duplicates, revocation everywhere', async function () {
    // Two processes need a database server: the embedded database belongs to one process.
    if (!usingPostgres) this.skip();
    const second = await startTestServer({ startJobs: false });
    try {
      const org = await createOrg(s.deps, { plan: 'enterprise' });
      const created = await http(s.baseUrl, 'POST', '/v1/api-keys', {
        token: org.token,
        body: { name: 'w', permissions: ['vpn:read', 'vpn:write'] },
      });
      const key = created.body.secret;
      const k = newKey();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => post(i % 2 === 0 ? s : second, key, k)),
      );
      const ok = results.filter((r) => r.status === 201);
      expect(ok.length + results.filter((r) => r.status === 409).length).to.equal(20);
      expect(new Set(ok.map((r) => r.body.connection.id)).size).to.equal(1);
      expect(await countConnections(s.deps, org.organizationId)).to.equal(1);

      // Revoked through one process, refused by the other on its next request.
      expect((await http(second.baseUrl, 'GET', '/v1/vpn/connections', { token: key })).status).to.equal(200);
      await http(s.baseUrl, 'DELETE', `/v1/api-keys/${created.body.api_key.id}`, { token: org.token });
      expect((await http(second.baseUrl, 'GET', '/v1/vpn/connections', { token: key })).status).to.equal(401);
    } finally {
      await second.close();
    }
  });

  it('PUT /billing/subscription: one plan change, one invoice, for the same key', async () => {
    const owner = await createOrg(s.deps);
    await addCard(s.baseUrl, owner.token);
    const k = newKey();
    const put = () =>
      http(s.baseUrl, 'PUT', '/v1/billing/subscription', {
        token: owner.token,
        body: { plan: 'pro' },
        headers: { 'idempotency-key': k },
      });
    const first = await put();
    expect(first.status).to.equal(200);
    const second = await put();
    expect(second.status).to.equal(200);
    expect(second.headers.get('idempotent-replayed')).to.equal('true');
    expect(second.text).to.equal(first.text);
    const invoices = await http(s.baseUrl, 'GET', '/v1/billing/invoices', { token: owner.token });
    expect(invoices.body.invoices.length).to.equal(1);
  });

  it('other methods ignore the header', async () => {
    const owner = await createOrg(s.deps);
    const k = newKey();
    const created = await post(s, owner.token, undefined);
    const id = created.body.connection.id;
    for (let i = 0; i < 2; i++) {
      const res = await http(s.baseUrl, 'PUT', `/v1/vpn/connections/${id}`, {
        token: owner.token,
        body: { name: `n${i}` },
        headers: { 'idempotency-key': k },
      });
      expect(res.status).to.equal(200);
      expect(res.headers.get('idempotent-replayed')).to.equal(null);
      expect(res.body.connection.name).to.equal(`n${i}`);
    }
  });
});
