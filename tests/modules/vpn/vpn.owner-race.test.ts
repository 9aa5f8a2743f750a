// Test tier: server
import { expect } from 'chai';
import pg from 'pg';
import { VpnConnection } from '../../../server/modules/vpn/vpn-connection.entity.js';
import { createOrg, createUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { createConnection } from './vpn-helpers.js';

// Deleting a user moves their connections to the deleting user in one transaction; a connection the user creates
// at that very moment must not stay behind with a deleted owner.
describe('VPN connections and the deletion of their owner', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  const ownedBy = (userId: string) => s.deps.db.orm.em.fork().count(VpnConnection, { user: userId });

  it('never leaves a connection owned by a user deleted while creating it (20 races)', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const members = await Promise.all(
      Array.from({ length: 20 }, () =>
        createUser(s.deps, owner.organizationId, { role: 'member', permissions: ['vpn:write', 'vpn:read'] }),
      ),
    );
    await Promise.all(
      members.map((m) =>
        Promise.all([
          createConnection(s.baseUrl, m.token, { name: 'at the last moment' }),
          http(s.baseUrl, 'DELETE', `/v1/users/${m.id}`, { token: owner.token }),
        ]).then(([create, del]) => {
          expect(del.status, del.text).to.equal(200);
          expect(create.status, create.text).to.be.oneOf([201, 401]);
        }),
      ),
    );
    for (const m of members) expect(await ownedBy(m.id), m.id).to.equal(0);
  });

  it('makes a create that waited for the deletion fail with 401 (PostgreSQL: a second connection holds the lock)', async function () {
    if (s.deps.db.kind !== 'postgresql') this.skip();
    const owner = await createOrg(s.deps);
    const member = await createUser(s.deps, owner.organizationId, {
      role: 'member',
      permissions: ['vpn:write'],
    });
    const other = new pg.Client({ connectionString: s.deps.config.databaseUrl });
    await other.connect();
    try {
      // The deletion's first step: the user's row locked for update.
      await other.query('begin');
      await other.query('select id from users where id = $1 for update', [member.id]);
      let settled = false;
      const create = createConnection(s.baseUrl, member.token).finally(() => (settled = true));
      await new Promise((r) => setTimeout(r, 300));
      expect(settled, 'the create waits for the user row').to.equal(false);
      await other.query('update users set deleted_at = now() where id = $1', [member.id]);
      await other.query('commit');
      const res = await create;
      expect(res.status, res.text).to.equal(401);
      expect(res.body.error.code).to.equal('UNAUTHORIZED');
    } finally {
      await other.end();
    }
    expect(await ownedBy(member.id)).to.equal(0);
  });
});
