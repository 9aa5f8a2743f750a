// Test tier: unit
import { expect } from 'chai';
import type { ActorContext, AppDeps } from '../../../server/kit/deps.js';
import { AppError } from '../../../server/lib/errors.js';
import * as organization from '../../../server/modules/organization/organization.service.js';
import { InMemoryOrganizationRepository } from './in-memory-organization.repository.js';
import { NO_EM } from '../../support/in-memory.js';
import { actorOf } from '../../support/unit.js';

/**
 * The organization service against an in-memory repository (./in-memory-organization.repository.ts): no server, no
 * database (docs/adding-a-module.md, "Checklist", step 3).
 */

const CREATED = new Date('2026-10-01T00:00:00.000Z');

function harness() {
  const repo = new InMemoryOrganizationRepository();
  const deps = {
    clock: { now: () => new Date('2026-11-01T00:00:00.000Z') },
    modules: { organization: { repository: repo } },
  } as unknown as AppDeps;
  const org = repo.addOrganization({ id: 'org_1', name: 'Acme', plan: 'pro', createdAt: CREATED });
  repo.addUser({ id: 'usr_owner', organizationId: org.id, role: 'owner', createdAt: CREATED });
  repo.addUser({ id: 'usr_admin', organizationId: org.id, role: 'admin', createdAt: CREATED });
  repo.addUser({
    id: 'usr_gone',
    organizationId: org.id,
    role: 'member',
    createdAt: CREATED,
    deletedAt: CREATED,
  });
  const actor = actorOf(org.id, 'usr_owner', 'owner');
  const ctx: ActorContext = {
    em: NO_EM,
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
