import type { Actor } from '../../../server/access/actor.js';
import { actsOnWholeOrganization } from '../../../server/access/scope.js';
import type { Em } from '../../../server/db/orm.js';
import type { EventDefinition } from '../../../server/events/define-event.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import { planLimitExceeded } from '../../../server/lib/errors.js';
import type { PageRequest } from '../../../server/lib/pagination.js';
import { planLimit, type PlanId } from '../../../server/lib/plans.js';
import type { HostingDeployment } from '../../../server/modules/hosting/hosting-deployment.entity.js';
import type { HostingSite } from '../../../server/modules/hosting/hosting-site.entity.js';
import type { DeploymentStatus } from '../../../server/modules/hosting/hosting.constants.js';
import type { BuildOutput } from '../../../server/modules/hosting/hosting.driver.js';
import type { SiteView } from '../../../server/modules/hosting/hosting.dto.js';
import type {
  EdgeRoute,
  HostingRepository,
  NewDeployment,
  NewSite,
  Page,
  SiteListFilter,
  UsageRecord,
} from '../../../server/modules/hosting/hosting.repository.js';
import { newDeploymentFields, newSiteFields } from '../../../server/modules/hosting/hosting.repository.js';
import type { TLogLine } from '../../../server/modules/hosting/hosting.schema.js';

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

/** The unit of work of the in-memory repository: nothing (rows change in place; no rollback). */
const NO_EM = {} as Em;

const newestFirst = <T extends { createdAt: Date; id: string }>(a: T, b: T) =>
  b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

function paged<T extends { id: string; createdAt: Date }>(rows: T[], q: PageRequest): Page<T> {
  const sorted = [...rows].sort(newestFirst);
  let start = (q.page - 1) * q.limit;
  if (q.startingAfter) start = sorted.findIndex((r) => r.id === q.startingAfter) + 1;
  const items = sorted.slice(start, start + q.limit);
  return { items, total: sorted.length, hasMore: start + q.limit < sorted.length };
}

/**
 * The hosting repository (server/modules/hosting/hosting.repository.ts) over plain arrays, for unit tests of the
 * services: no database, no server. Rows are plain objects shaped as the entities; a transaction runs its work as
 * it is. Organizations' plans are set with {@link setPlan} (`starter` by default).
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

  async listSites(_em: Em, f: SiteListFilter, page: PageRequest): Promise<Page<SiteView>> {
    const rows = f.none
      ? []
      : this.sites.filter(
          (s) =>
            s.organization.id === f.organizationId &&
            (!f.userId || s.user.id === f.userId) &&
            (!f.status || s.status === f.status) &&
            (!f.framework || s.framework === f.framework),
        );
    return paged(rows, page);
  }

  async assertCanCreateSite(_tx: Em, _deps: AppDeps, actor: Actor): Promise<void> {
    if (this.deletedUsers.has(actor.userId)) throw new Error('the owner no longer exists');
    const limit = planLimit(this.plans.get(actor.organizationId) ?? 'starter', 'hosting_sites');
    const current = this.sites.filter((s) => s.organization.id === actor.organizationId).length;
    if (current >= limit) {
      throw planLimitExceeded(`Your plan allows ${limit} hosting sites; delete one or upgrade the plan`, {
        resource: 'hosting_sites',
        limit,
        current,
      });
    }
  }

  async domainTaken(_tx: Em, domain: string, exceptSiteId?: string): Promise<boolean> {
    return this.sites.some((s) => s.domain === domain && s.id !== exceptSiteId);
  }

  async lockSlugBase(): Promise<void> {}

  async slugsInUse(_tx: Em, slugs: readonly string[]): Promise<Set<string>> {
    return new Set(this.sites.map((s) => s.slug).filter((slug) => slugs.includes(slug)));
  }

  async previewInUse(_tx: Em, slug: string, shortId: string): Promise<boolean> {
    return this.deployments.some((d) => d.site.slug === slug && d.id.startsWith(`dep_${shortId}`));
  }

  createSite(_tx: Em, s: NewSite): HostingSite {
    const site = {
      ...newSiteFields(s),
      organization: { id: s.organizationId },
      user: { id: s.userId },
    } as unknown as HostingSite;
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
    return this.deployments.filter((d) => d.site.id === siteId && statuses.includes(d.status));
  }

  async countDeployments(_em: Em, siteId: string, statuses: readonly DeploymentStatus[]): Promise<number> {
    return (await this.deploymentsIn(NO_EM, siteId, statuses)).length;
  }

  async deploymentIds(_em: Em, siteId: string): Promise<string[]> {
    return this.deployments.filter((d) => d.site.id === siteId).map((d) => d.id);
  }

  async existingDeployments(_em: Em, ids: readonly string[]): Promise<Set<string>> {
    return new Set(this.deployments.filter((d) => ids.includes(d.id)).map((d) => d.id));
  }

  createDeployment(_tx: Em, n: NewDeployment): HostingDeployment {
    const d = newDeploymentFields(n) as unknown as HostingDeployment;
    this.deployments.push(d);
    return d;
  }

  async listDeployments(
    _em: Em,
    siteId: string,
    status: DeploymentStatus | undefined,
    page: PageRequest,
  ): Promise<Page<HostingDeployment>> {
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
    const s = this.sites.find((x) => (by === 'slug' ? x.slug : x.domain) === value);
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
