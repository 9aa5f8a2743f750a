import { expect } from 'chai';
import type { Actor } from '../../../server/access/actor.js';
import type { Organization } from '../../../server/access/organization.entity.js';
import type { User } from '../../../server/access/user.entity.js';
import type { Em } from '../../../server/db/orm.js';
import type { ActorContext, AppDeps } from '../../../server/kit/deps.js';
import { AppError } from '../../../server/lib/errors.js';
import * as organization from '../../../server/modules/organization/organization.service.js';
import { InMemoryOrganizationRepository } from './in-memory-organization.repository.js';

/**
 * The organization service against an in-memory repository (./in-memory-organization.repository.ts): no server, no
 * database (docs/adding-a-module.md, "Data access").
 */

const CREATED = new Date('2026-10-01T00:00:00.000Z');

function harness() {
  const repo = new InMemoryOrganizationRepository();
  const deps = {
    clock: { now: () => new Date('2026-11-01T00:00:00.000Z') },
    modules: { organization: { repository: repo } },
  } as unknown as AppDeps;
  const org = { id: 'org_1', name: 'Acme', plan: 'pro', createdAt: CREATED, deletedAt: null } as Organization;
  repo.organizations.push(org);
  const user = (id: string, role: User['role'], extra: Partial<User> = {}) =>
    ({ id, role, organization: org, createdAt: CREATED, deletedAt: null, ...extra }) as User;
  repo.users.push(
    user('usr_owner', 'owner'),
    user('usr_admin', 'admin'),
    user('usr_gone', 'member', { deletedAt: CREATED }),
  );
  const actor = { userId: 'usr_owner', organizationId: org.id, role: 'owner' } as Actor;
  const ctx: ActorContext = {
    em: {} as Em,
    deps,
    actor,
    requestId: 'req',
    ip: '127.0.0.1',
    userAgent: undefined,
  };
  return { repo, org, ctx };
}

describe('organization service (in-memory repository)', () => {
  it('shows the organization with its owner and the users that are not deleted', async () => {
    const { ctx } = harness();
    const out = await organization.getOrganization(ctx);
    expect(out.organization).to.deep.equal({
      id: 'org_1',
      name: 'Acme',
      plan: 'pro',
      owner_id: 'usr_owner',
      users_count: 2,
      created_at: CREATED.toISOString(),
    });
  });

  it('renames it in a transaction, and writes nothing when the name is the same', async () => {
    const { repo, org, ctx } = harness();
    const same = await organization.updateOrganization(ctx, { name: 'Acme' });
    expect(same.organization.name).to.equal('Acme');
    expect(repo.flushes).to.equal(0);
    const renamed = await organization.updateOrganization(ctx, { name: 'Acme Labs' });
    expect(renamed.organization.name).to.equal('Acme Labs');
    expect(org.name).to.equal('Acme Labs');
    expect(repo.flushes).to.equal(1);
  });

  it('answers 404 for an organization that is deleted', async () => {
    const { org, ctx } = harness();
    org.deletedAt = new Date();
    const err = await organization.getOrganization(ctx).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).status).to.equal(404);
  });
});
