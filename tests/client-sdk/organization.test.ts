// Test tier: server
import { expect } from 'chai';
import { AuthenticationError, ConflictError, ValidationError, createClient } from '@cloud-platform/client';
import { DEFAULT_PASSWORD, createOrg, createUser } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { rejection } from '../support/rejection.js';

describe('client SDK: the organization', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('reads, renames, hands ownership over and deletes the organization, with typed errors', async () => {
    const owner = await createOrg(s.deps, { name: 'SDK Org' });
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const member = await createUser(s.deps, owner.organizationId);
    const asOwner = createClient({ baseUrl: s.baseUrl, token: owner.token });
    const asAdmin = createClient({ baseUrl: s.baseUrl, token: admin.token });

    const { organization } = await asOwner.organization.get.query();
    expect(organization).to.include({
      id: owner.organizationId,
      name: 'SDK Org',
      owner_id: owner.id,
      users_count: 3,
    });
    const renamed = await asAdmin.organization.update.mutate({ name: 'SDK Org 2' });
    expect(renamed.organization.name).to.equal('SDK Org 2');

    const notAdmin = await rejection(
      asOwner.organization.transferOwnership.mutate({ user_id: member.id, password: DEFAULT_PASSWORD }),
    );
    expect(notAdmin).to.be.instanceOf(ConflictError);
    const wrong = await rejection(
      asOwner.organization.transferOwnership.mutate({ user_id: admin.id, password: 'wrong-password' }),
    );
    expect(wrong).to.be.instanceOf(AuthenticationError);
    expect((wrong as AuthenticationError).code).to.equal('INVALID_CREDENTIALS');
    const moved = await asOwner.organization.transferOwnership.mutate({
      user_id: admin.id,
      password: DEFAULT_PASSWORD,
    });
    expect(moved.organization.owner_id).to.equal(admin.id);

    // The former owner may no longer delete it; the new one must name it exactly.
    expect(
      await rejection(
        asOwner.organization.delete.mutate({ confirm: 'SDK Org 2', password: DEFAULT_PASSWORD }),
      ),
    ).to.have.property('status', 403);
    const badName = await rejection(
      asAdmin.organization.delete.mutate({ confirm: 'SDK Org', password: DEFAULT_PASSWORD }),
    );
    expect(badName).to.be.instanceOf(ValidationError);
    const deleted = await asAdmin.organization.delete.mutate({
      confirm: 'SDK Org 2',
      password: DEFAULT_PASSWORD,
    });
    expect(deleted).to.include({ success: true, id: owner.organizationId });
    const after = await rejection(asAdmin.organization.get.query());
    expect(after).to.be.instanceOf(AuthenticationError);
    expect((after as AuthenticationError).code).to.equal('UNAUTHORIZED');
  });
});
