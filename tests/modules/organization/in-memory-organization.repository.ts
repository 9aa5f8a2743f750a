import { Organization } from '../../../server/access/organization.entity.js';
import { User, type Role } from '../../../server/access/user.entity.js';
import type { Em } from '../../../server/db/orm.js';
import type { EventDefinition } from '../../../server/events/define-event.js';
import type { PlanId } from '../../../server/lib/plans.js';
import type {
  OrganizationPeople,
  OrganizationRepository,
} from '../../../server/modules/organization/organization.repository.js';
import { NO_EM, reference, row } from '../../support/in-memory.js';

/**
 * The organization repository (server/modules/organization/organization.repository.ts) over plain arrays, for unit
 * tests of the service: no database, no server; held to the MikroORM repository by
 * ./organization.repository-contract.ts. The rows the repository only reads (organizations, users: other parts of the
 * platform create them) are added with {@link addOrganization} and {@link addUser}. A transaction runs its work as it
 * is; `flushes` counts the writes asked for, `events` what was recorded.
 */
export class InMemoryOrganizationRepository implements OrganizationRepository {
  readonly organizations: Organization[] = [];
  readonly users: User[] = [];
  readonly revokedSessions: { organizationId: string; at: Date }[] = [];
  readonly events: { event: string; organizationId: string; payload: unknown }[] = [];
  flushes = 0;

  addOrganization(o: { id: string; name: string; plan?: PlanId; createdAt: Date; deletedAt?: Date | null }) {
    const org = row(Organization, {
      id: o.id,
      name: o.name,
      plan: o.plan ?? 'starter',
      planStatus: 'active',
      createdAt: o.createdAt,
      updatedAt: o.createdAt,
      deletedAt: o.deletedAt ?? null,
      requireTwoFactor: false,
      allowedIpRanges: [],
      sessionMaxAge: null,
    });
    this.organizations.push(org);
    return org;
  }

  addUser(u: { id: string; organizationId: string; role: Role; createdAt: Date; deletedAt?: Date | null }) {
    const user = row(User, {
      id: u.id,
      organization: reference(Organization, u.organizationId),
      email: `${u.id}@example.com`,
      name: u.id,
      passwordHash: null,
      role: u.role,
      status: 'active',
      permissions: [],
      twoFactorEnabled: false,
      lastLogin: null,
      avatarUrl: null,
      timezone: null,
      language: null,
      createdAt: u.createdAt,
      updatedAt: u.createdAt,
      deletedAt: u.deletedAt ?? null,
    });
    this.users.push(user);
    return user;
  }

  fork(): Em {
    return NO_EM;
  }

  transaction<R>(_em: Em, work: (tx: Em) => Promise<R>): Promise<R> {
    return work(NO_EM);
  }

  async flush(): Promise<void> {
    this.flushes += 1;
  }

  recordEvent<P>(_tx: Em, event: EventDefinition<P>, payload: P, organizationId: string): void {
    this.events.push({ event: event.type, organizationId, payload });
  }

  async findOrganization(_em: Em, id: string): Promise<Organization | null> {
    return this.organizations.find((o) => o.id === id && !o.deletedAt) ?? null;
  }

  async people(_em: Em, organizationId: string): Promise<OrganizationPeople> {
    const live = this.users.filter((u) => u.organization.id === organizationId && !u.deletedAt);
    const owner = live
      .filter((u) => u.role === 'owner')
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime())[0];
    return { ownerId: owner?.id ?? null, usersCount: live.length };
  }

  async isDeleted(_em: Em, id: string): Promise<boolean | null> {
    const org = this.organizations.find((o) => o.id === id);
    return org ? org.deletedAt !== null : null;
  }

  async deletedOrganizationIds(): Promise<string[]> {
    return this.organizations.filter((o) => o.deletedAt !== null).map((o) => o.id);
  }

  async findUser(_em: Em, organizationId: string, id: string): Promise<User | null> {
    return (
      this.users.find((u) => u.id === id && u.organization.id === organizationId && !u.deletedAt) ?? null
    );
  }

  async revokeSessions(_tx: Em, organizationId: string, now: Date): Promise<void> {
    this.revokedSessions.push({ organizationId, at: now });
  }
}
