import type { Actor } from '../../../server/access/actor.js';
import { Organization } from '../../../server/access/organization.entity.js';
import { User } from '../../../server/access/user.entity.js';
import { actsOnWholeOrganization } from '../../../server/access/scope.js';
import type { Em } from '../../../server/db/orm.js';
import type { Paged } from '../../../server/db/pagination.js';
import type { EventDefinition } from '../../../server/events/define-event.js';
import type { OrganizationPlan } from '../../../server/kit/plan-limit.js';
import { invalidAccessToken } from '../../../server/lib/errors.js';
import type { PageRequest } from '../../../server/lib/pagination.js';
import type { PlanId } from '../../../server/lib/plans.js';
import { HostingDeployment } from '../../../server/modules/hosting/hosting-deployment.entity.js';
import { HostingSite } from '../../../server/modules/hosting/hosting-site.entity.js';
import type { DeploymentStatus } from '../../../server/modules/hosting/hosting.constants.js';
import type { BuildOutput } from '../../../server/modules/hosting/hosting.driver.js';
import type { SiteView } from '../../../server/modules/hosting/hosting.dto.js';
import type {
  EdgeRoute,
  HostingRepository,
  NewDeployment,
  NewSite,
  SiteListFilter,
  UsageRecord,
} from '../../../server/modules/hosting/hosting.repository.js';
import { newDeploymentFields, newSiteFields } from '../../../server/modules/hosting/hosting.repository.js';
import type { TLogLine } from '../../../server/modules/hosting/hosting.schema.js';
import { byId, NO_EM, newestFirst, reference, row } from '../../support/in-memory.js';

/**
 * A site as a read without `populate` gives it: `environmentVariables` is lazy in the entity, so not loaded (the
 * row's other fields are the row's own).
 */
function withoutEnvironment(site: HostingSite): HostingSite {
  return new Proxy(site, {
    get: (target, key, receiver) =>
      key === 'environmentVariables' ? undefined : (Reflect.get(target, key, receiver) as unknown),
  });
}

/** The list view of a site row (the columns the MikroORM repository selects). */
function toSiteView(s: HostingSite): SiteView {
  return {
    id: s.id,
    name: s.name,
    slug: s.slug,
    domain: s.domain,
    domainVerificationToken: s.domainVerificationToken,
    domainVerifiedAt: s.domainVerifiedAt,
    status: s.status,
    sslEnabled: s.sslEnabled,
    framework: s.framework,
    gitRepo: s.gitRepo,
    branch: s.branch,
    user: { id: s.user.id },
    liveDeploymentId: s.liveDeploymentId,
    liveDeploymentAt: s.liveDeploymentAt,
    previewDeploymentId: s.previewDeploymentId,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}

function paged<T extends { id: string; createdAt: Date }>(rows: T[], q: PageRequest): Paged<T> {
  const sorted = [...rows].sort(newestFirst);
  let start = (q.page - 1) * q.limit;
  if (q.startingAfter) start = sorted.findIndex((r) => r.id === q.startingAfter) + 1;
  const items = sorted.slice(start, start + q.limit);
  return { items, total: sorted.length, hasMore: start + q.limit < sorted.length };
}

/**
 * The hosting repository (server/modules/hosting/hosting.repository.ts) over plain arrays, for unit tests of the
 * services: no database, no server; held to the MikroORM repository by ./hosting.repository-contract.ts. Rows are
 * entity instances; a transaction runs its work as it is. Organizations' plans (the organization's row, in the
 * database) are set with {@link setPlan} (`starter` by default).
 */
export class InMemoryHostingRepository implements HostingRepository {
  readonly sites: HostingSite[] = [];
  readonly deployments: HostingDeployment[] = [];
  readonly logs = new Map<string, TLogLine[]>();
  readonly usage: UsageRecord[] = [];
  readonly events: { type: string; payload: unknown; organizationId: string }[] = [];
  readonly plans = new Map<string, PlanId>();
  readonly edgeTraffic: { siteId: string; minute: Date; requests: number; bytes: number }[] = [];
  /** Users who no longer exist (a create on their behalf is refused as the real repository does). */
  readonly deletedUsers = new Set<string>();

  setPlan(organizationId: string, plan: PlanId): void {
    this.plans.set(organizationId, plan);
  }

  fork(): Em {
    return NO_EM;
  }

  transaction<R>(_em: Em, work: (tx: Em) => Promise<R>): Promise<R> {
    return work(NO_EM);
  }

  snapshot<R>(_em: Em, read: (tx: Em) => Promise<R>): Promise<R> {
    return read(NO_EM);
  }

  async findSite(
    _em: Em,
    actor: Actor,
    id: string,
    opts: { withEnvironment?: boolean } = {},
  ): Promise<HostingSite | null> {
    const s = this.sites.find((x) => x.id === id);
    if (!s || s.organization.id !== actor.organizationId) return null;
    if (!actsOnWholeOrganization(actor) && s.user.id !== actor.userId) return null;
    return opts.withEnvironment ? s : withoutEnvironment(s);
  }

  async lockSite(_tx: Em, id: string, opts: { withEnvironment?: boolean } = {}): Promise<HostingSite | null> {
    const s = this.sites.find((x) => x.id === id);
    if (!s) return null;
    return opts.withEnvironment ? s : withoutEnvironment(s);
  }

  async siteForBuild(_em: Em, id: string): Promise<HostingSite | null> {
    return this.sites.find((x) => x.id === id) ?? null;
  }

  async listSites(_em: Em, f: SiteListFilter, page: PageRequest): Promise<Paged<SiteView>> {
    const rows = f.none
      ? []
      : this.sites.filter(
          (s) =>
            s.organization.id === f.organizationId &&
            (!f.userId || s.user.id === f.userId) &&
            (!f.status || s.status === f.status) &&
            (!f.framework || s.framework === f.framework),
        );
    const found = paged(rows, page);
    return { ...found, items: found.items.map(toSiteView) };
  }

  async lockOwner(_tx: Em, userId: string): Promise<void> {
    if (this.deletedUsers.has(userId)) {
      throw invalidAccessToken(
        'Access token is no longer valid (signed out, or the user was suspended or removed)',
      );
    }
  }

  async lockPlan(_tx: Em, organizationId: string): Promise<OrganizationPlan> {
    return { plan: this.plans.get(organizationId) ?? 'starter', status: 'active' };
  }

  async lockedSiteCount(_tx: Em, _deps: unknown, organizationId: string): Promise<number> {
    return this.sites.filter((s) => s.organization.id === organizationId).length;
  }

  async domainTaken(_tx: Em, domain: string, exceptSiteId?: string): Promise<boolean> {
    return this.sites.some((s) => s.domain === domain && s.domainVerifiedAt && s.id !== exceptSiteId);
  }

  async lockSlugBase(): Promise<void> {}

  async slugsInUse(_tx: Em, slugs: readonly string[]): Promise<Set<string>> {
    return new Set(this.sites.map((s) => s.slug).filter((slug) => slugs.includes(slug)));
  }

  async previewInUse(_tx: Em, slug: string, shortId: string): Promise<boolean> {
    return this.deployments.some((d) => d.site.slug === slug && d.id.startsWith(`dep_${shortId}`));
  }

  createSite(_tx: Em, s: NewSite): HostingSite {
    const site = row(HostingSite, {
      ...newSiteFields(s),
      organization: reference(Organization, s.organizationId),
      user: reference(User, s.userId),
    });
    this.sites.push(site);
    return site;
  }

  removeSite(_tx: Em, site: HostingSite): void {
    this.sites.splice(
      this.sites.findIndex((s) => s.id === site.id),
      1,
    );
    for (const d of this.deployments.filter((x) => x.site.id === site.id)) {
      this.deployments.splice(this.deployments.indexOf(d), 1);
      this.logs.delete(d.id);
    }
  }

  async findDeployment(_em: Em, siteId: string, id: string): Promise<HostingDeployment | null> {
    return this.deployments.find((d) => d.id === id && d.site.id === siteId) ?? null;
  }

  async deploymentsIn(
    _em: Em,
    siteId: string,
    statuses: readonly DeploymentStatus[],
  ): Promise<HostingDeployment[]> {
    return this.deployments
      .filter((d) => d.site.id === siteId && statuses.includes(d.status))
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || byId(a, b));
  }

  async countDeployments(_em: Em, siteId: string, statuses: readonly DeploymentStatus[]): Promise<number> {
    return (await this.deploymentsIn(NO_EM, siteId, statuses)).length;
  }

  async buildShare(_tx: Em, organizationId: string): Promise<{ building: number; othersWaiting: boolean }> {
    const orgOf = (d: HostingDeployment) => this.sites.find((s) => s.id === d.site.id)?.organization.id;
    const buildingOrgs = new Set(this.deployments.filter((d) => d.status === 'building').map(orgOf));
    return {
      building: this.deployments.filter((d) => d.status === 'building' && orgOf(d) === organizationId).length,
      othersWaiting: this.deployments.some(
        (d) => d.status === 'queued' && orgOf(d) !== organizationId && !buildingOrgs.has(orgOf(d)),
      ),
    };
  }

  async deploymentIds(_em: Em, siteId: string): Promise<string[]> {
    return this.deployments.filter((d) => d.site.id === siteId).map((d) => d.id);
  }

  async existingDeployments(_em: Em, ids: readonly string[]): Promise<Set<string>> {
    return new Set(this.deployments.filter((d) => ids.includes(d.id)).map((d) => d.id));
  }

  createDeployment(_tx: Em, n: NewDeployment): HostingDeployment {
    const d = row(HostingDeployment, newDeploymentFields(n));
    this.deployments.push(d);
    return d;
  }

  async listDeployments(
    _em: Em,
    siteId: string,
    status: DeploymentStatus | undefined,
    page: PageRequest,
  ): Promise<Paged<HostingDeployment>> {
    return paged(
      this.deployments.filter((d) => d.site.id === siteId && (!status || d.status === status)),
      page,
    );
  }

  async deploymentStatus(id: string): Promise<DeploymentStatus | null> {
    return this.deployments.find((d) => d.id === id)?.status ?? null;
  }

  async sitesWithUnfinishedBuilds(): Promise<string[]> {
    return [
      ...new Set(
        this.deployments
          .filter((d) => d.status === 'queued' || d.status === 'building')
          .map((d) => d.site.id),
      ),
    ];
  }

  async appendLogLines(
    _tx: Em,
    deploymentId: string,
    lastSeq: number,
    output: readonly BuildOutput[],
    now: Date,
  ): Promise<TLogLine[]> {
    const lines = output.map((o, i) => ({
      seq: lastSeq + i + 1,
      timestamp: now.toISOString(),
      stream: o.stream,
      message: o.message,
    }));
    const all = this.logs.get(deploymentId) ?? [];
    if (lines.some((l) => all.some((x) => x.seq === l.seq))) throw new Error('duplicate log line');
    all.push(...lines);
    this.logs.set(deploymentId, all);
    return lines;
  }

  async readLogLines(
    _em: Em,
    deploymentId: string,
    after: number,
    limit: number,
    upTo = 2_147_483_647,
  ): Promise<TLogLine[]> {
    return (this.logs.get(deploymentId) ?? []).filter((l) => l.seq > after && l.seq <= upTo).slice(0, limit);
  }

  async notify(): Promise<void> {}

  addUsageRecord(_tx: Em, record: UsageRecord): void {
    this.usage.push(record);
  }

  recordEvent<P>(_tx: Em, event: EventDefinition<P>, payload: P, organizationId: string): void {
    this.events.push({ type: event.type, payload, organizationId });
  }

  async liveRoute(by: 'slug' | 'domain', value: string): Promise<EdgeRoute | null> {
    const s = this.sites.find((x) =>
      by === 'slug' ? x.slug === value : x.domain === value && x.domainVerifiedAt,
    );
    return s?.liveDeploymentId ? { siteId: s.id, deploymentId: s.liveDeploymentId } : null;
  }

  async previewRoute(slug: string, shortId: string): Promise<EdgeRoute | null> {
    const d = this.deployments.find(
      (x) => x.site.slug === slug && x.id.startsWith(`dep_${shortId}`) && x.status === 'success',
    );
    return d ? { siteId: d.site.id, deploymentId: d.id } : null;
  }

  async addEdgeTraffic(rows: { siteId: string; minute: Date; requests: number; bytes: number }[]) {
    this.edgeTraffic.push(...rows.filter((r) => this.sites.some((s) => s.id === r.siteId)));
  }

  async edgeTrafficSince(siteId: string, since: Date): Promise<{ requests: number; bytes: number }> {
    const rows = this.edgeTraffic.filter((r) => r.siteId === siteId && r.minute > since);
    return {
      requests: rows.reduce((n, r) => n + r.requests, 0),
      bytes: rows.reduce((n, r) => n + r.bytes, 0),
    };
  }

  async clearEnvironments(): Promise<{ id: string; stored: string }[]> {
    return this.sites
      .filter((s) => typeof s.environmentVariables === 'object' && s.environmentVariables !== null)
      .map((s) => ({ id: s.id, stored: JSON.stringify(s.environmentVariables) }));
  }

  async replaceClearEnvironment(id: string, stored: string, sealed: string): Promise<boolean> {
    const s = this.sites.find((x) => x.id === id);
    if (!s || JSON.stringify(s.environmentVariables) !== stored) return false;
    s.environmentVariables = sealed;
    return true;
  }
}
