// Test tier: server
import { expect } from 'chai';
import { Event } from '../../../server/events/event.entity.js';
import { createOrg, createUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';

/**
 * `organization.updated` (docs/organization.md): a rename and an ownership transfer emit it with the organization as
 * `GET /organization` shows it; a rename to the same name changes nothing and emits nothing.
 */
describe('organization: organization.updated on a rename and an ownership transfer', function () {
  this.timeout(120_000);
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  const emitted = async (organizationId: string) =>
    (
      await s.deps.db.orm.em
        .fork()
        .find(Event, { organizationId, type: 'organization.updated' }, { orderBy: { seq: 'asc' } })
    ).map((e) => (e.data as { object: Record<string, unknown> }).object);

  it('emits the organization as GET /organization shows it', async () => {
    const owner = await createOrg(s.deps);
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });

    const renamed = await http(s.baseUrl, 'PUT', '/v1/organization', {
      token: owner.token,
      body: { name: 'Renamed Org' },
    });
    expect(renamed.status, renamed.text).to.equal(200);
    const same = await http(s.baseUrl, 'PUT', '/v1/organization', {
      token: admin.token,
      body: { name: 'Renamed Org' },
    });
    expect(same.status).to.equal(200);
    expect(await emitted(owner.organizationId)).to.deep.equal([renamed.body.organization]);

    const moved = await http(s.baseUrl, 'POST', '/v1/organization/transfer-ownership', {
      token: owner.token,
      body: { user_id: admin.id, password: owner.password },
    });
    expect(moved.status, moved.text).to.equal(200);
    const events = await emitted(owner.organizationId);
    expect(events).to.have.length(2);
    expect(events[1]).to.deep.equal(moved.body.organization);
    expect(events[1]!.owner_id).to.equal(admin.id);
  });
});
