import { MikroOrmRepository } from '../../kit/repository.js';
import { IsolationLevel, LockMode } from '@mikro-orm/core';
import type { Actor } from '../../access/actor.js';
import { lockOwner } from '../../access/owned-resources.js';
import { ownedBy } from '../../access/scope.js';
import { User } from '../../access/user.entity.js';
import { countedRows, type ListCountSpec } from '../../db/list-counts.js';
import type { Em } from '../../db/orm.js';
import { findPage, type Paged } from '../../db/pagination.js';
import { epochMs, findRawPage, fromEpochMs as ms, type RawPageSpec } from '../../db/raw-page.js';
import type { EventDefinition } from '../../events/define-event.js';
import type { AppDeps } from '../../kit/deps.js';
import type { OrganizationRows } from '../../kit/module.js';
import { lockOrganizationPlan, lockPlanCounter, type OrganizationPlan } from '../../kit/plan-limit.js';
import type { PageRequest } from '../../lib/pagination.js';
import { UNFINISHED_STATUSES } from './deployment-state.js';
import { HostingBuildLogSchema } from './hosting-build-log.entity.js';
import { HostingDeployment, HostingDeploymentSchema } from './hosting-deployment.entity.js';
import { HostingEdgeTrafficSchema } from './hosting-edge-traffic.entity.js';
import { HostingSite, HostingSiteSchema } from './hosting-site.entity.js';
import { HostingUsageRecord, HostingUsageRecordSchema } from './hosting-usage-record.entity.js';
import {
  DEPLOYMENT_STATUSES,
  FRAMEWORKS,
  SITE_STATUSES,
  type DeploymentStatus,
  type Framework,
  type SiteStatus,
} from './hosting.constants.js';
import type { BuildOutput } from './hosting.driver.js';
import type { SiteView } from './hosting.dto.js';
import type { TLogLine } from './hosting.schema.js';

/**
 * Every read and write of the hosting module's tables (docs/hosting.md, "Inside the module"): the services, the build
 * chain, the edge and the manifest go through a {@link HostingRepository}, never through the ORM or SQL themselves.
 * The process gets the MikroORM one ({@link MikroOrmHostingRepository}) from the module's `create`
 * (`repositoryOf(deps, 'hosting')`); a unit test gives a service an in-memory one
 * (tests/modules/hosting/in-memory-hosting.repository.ts).
 *
 * A unit of work is an `Em` to the caller: opaque, handed back to the repository (and to the kit's functions that
 * write in the same transaction, such as the job queue's `send`). Rows are the entities; a change to a row read in a
 * transaction is written when the transaction commits.
 */

/** The module's tables, from its entities (the manifest's lists and the SQL below name them from here). */
export const HOSTING_TABLES = {
  sites: HostingSiteSchema.tableName,
  deployments: HostingDeploymentSchema.tableName,
  buildLogs: HostingBuildLogSchema.tableName,
  usageRecords: HostingUsageRecordSchema.tableName,
  edgeTraffic: HostingEdgeTrafficSchema.tableName,
} as const;

const T = HOSTING_TABLES;
/** The first key of the advisory lock of an organization's builds (the second is its id's hash). */
const BUILD_SHARE_LOCK = 0x6275696c;

/** A site list's filter, already scoped (the caller's organization, a user's sites, the list's filters). */
export interface SiteListFilter {
  organizationId: string;
  userId?: string;
  status?: SiteStatus;
  framework?: Framework;
  /** A member asking for another user's sites: nothing matches. */
  none?: boolean;
}

/** What a new site row holds (the rest is defaulted). */
export interface NewSite {
  id: string;
  organizationId: string;
  userId: string;
  now: Date;
  name: string;
  slug: string;
  domain: string | null;
  /** The TXT value that verifies `domain` (null without one). */
  domainVerificationToken: string | null;
  gitRepo: string;
  branch: string;
  framework: Framework;
  buildCommand: string;
  outputDirectory: string;
  nodeVersion: HostingSite['nodeVersion'];
  environmentVariables: string;
}

/** What a new deployment row holds (queued; the rest is defaulted). */
export interface NewDeployment {
  id: string;
  site: HostingSite;
  now: Date;
  branch: string;
  commit: string;
  commitPinned: boolean;
  builder: HostingDeployment['builder'];
  message: string | null;
}

/** Time a build ran or a site served, kept for the usage report after the site is gone. */
export interface UsageRecord {
  resourceId: string;
  organizationId: string;
  kind: 'build' | 'site';
  siteId: string;
  startedAt: Date;
  endedAt: Date;
}

/** Which deployment a host of the edge serves. */
export interface EdgeRoute {
  siteId: string;
  deploymentId: string;
}

export interface HostingRepository {
  // ---------- units of work ----------
  /** A fresh unit of work (jobs, the edge, followers of a log). */
  fork(): Em;
  /** Runs `work` in a transaction of `em` (committed when it returns, rolled back when it throws). */
  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R>;
  /** Runs `read` in one read-only snapshot (the site and its deployments agree). */
  snapshot<R>(em: Em, read: (tx: Em) => Promise<R>): Promise<R>;

  // ---------- sites ----------
  /** The site `id` within the actor's scope (another organization's, or for a member another user's: null). */
  findSite(
    em: Em,
    actor: Actor,
    id: string,
    opts?: { lock?: boolean; withEnvironment?: boolean },
  ): Promise<HostingSite | null>;
  /** The site `id` with its row locked (`tx`), whoever owns it; null when gone. */
  lockSite(tx: Em, id: string, opts?: { withEnvironment?: boolean }): Promise<HostingSite | null>;
  /** The site `id`, unlocked, with its environment (the build chain's first look). */
  siteForBuild(em: Em, id: string): Promise<HostingSite | null>;
  listSites(em: Em, filter: SiteListFilter, page: PageRequest): Promise<Paged<SiteView>>;
  /** The user's row, share-locked to the commit (a user deleted meanwhile cannot create: 401); run first in a create. */
  lockOwner(tx: Em, userId: string): Promise<void>;
  /** The organization's plan, share-locked to the commit (kit/plan-limit.ts): a plan change waits for the creates. */
  lockPlan(tx: Em, organizationId: string): Promise<OrganizationPlan>;
  /**
   * The organization's sites as the plan counts them (`hosting_sites`), after queuing on its creates of sites (an
   * advisory lock held to the commit): each create counts what the ones before it committed.
   */
  lockedSiteCount(tx: Em, deps: AppDeps, organizationId: string): Promise<number>;
  /** True when a site other than `exceptSiteId` has verified `domain` (pending claims do not count). */
  domainTaken(tx: Em, domain: string, exceptSiteId?: string): Promise<boolean>;
  /** Creates of sites with the same slug base queue here until the transaction ends. */
  lockSlugBase(tx: Em, base: string): Promise<void>;
  /** Which of `slugs` sites use. */
  slugsInUse(tx: Em, slugs: readonly string[]): Promise<Set<string>>;
  /** True when a deployment of the site `slug` has an id starting `dep_<shortId>` (a preview address). */
  previewInUse(tx: Em, slug: string, shortId: string): Promise<boolean>;
  createSite(tx: Em, site: NewSite): HostingSite;
  /** Deletes the site; its deployments and logs go with it. */
  removeSite(tx: Em, site: HostingSite): void;

  // ---------- deployments ----------
  findDeployment(em: Em, siteId: string, id: string): Promise<HostingDeployment | null>;
  /** The site's deployments in one of `statuses`, oldest first. */
  deploymentsIn(em: Em, siteId: string, statuses: readonly DeploymentStatus[]): Promise<HostingDeployment[]>;
  countDeployments(em: Em, siteId: string, statuses: readonly DeploymentStatus[]): Promise<number>;
  /**
   * The organization's share of the builders, under a lock on its builds held to the end of `tx` (two of its sites
   * starting at once count each other): how many of its deployments are `building` (every site, every process), and
   * whether another organization with none building has a deployment `queued` (docs/hosting.md, "Sharing the builders").
   */
  buildShare(tx: Em, organizationId: string): Promise<{ building: number; othersWaiting: boolean }>;
  /** Ids of every deployment of the site (their artifacts go when the site does). */
  deploymentIds(em: Em, siteId: string): Promise<string[]>;
  /** Which of `ids` are deployments that still exist (any site, any organization). */
  existingDeployments(em: Em, ids: readonly string[]): Promise<Set<string>>;
  createDeployment(tx: Em, d: NewDeployment): HostingDeployment;
  listDeployments(
    em: Em,
    siteId: string,
    status: DeploymentStatus | undefined,
    page: PageRequest,
  ): Promise<Paged<HostingDeployment>>;
  /** The deployment's status as committed now (a fresh read); null when it is gone. */
  deploymentStatus(id: string): Promise<DeploymentStatus | null>;
  /** Sites with a queued or building deployment. */
  sitesWithUnfinishedBuilds(): Promise<string[]>;

  // ---------- build logs ----------
  /** Appends `output` numbered from `lastSeq + 1`; returns the lines as the API shows them. */
  appendLogLines(
    tx: Em,
    deploymentId: string,
    lastSeq: number,
    output: readonly BuildOutput[],
    now: Date,
  ): Promise<TLogLine[]>;
  /** Lines with `seq` in `(after, upTo]`, in order, at most `limit`. */
  readLogLines(
    em: Em,
    deploymentId: string,
    after: number,
    limit: number,
    upTo?: number,
  ): Promise<TLogLine[]>;
  /** PostgreSQL `NOTIFY` at commit of `tx` (build-logs.ts); nothing on PGlite. */
  notify(tx: Em, channel: string, payload: string): Promise<void>;

  // ---------- usage, events ----------
  addUsageRecord(tx: Em, record: UsageRecord): void;
  /** Records a webhook event in `tx` (the transactional outbox). */
  recordEvent<P>(tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, now: Date): void;

  // ---------- the edge ----------
  /** The live deployment of the site whose `slug` or verified custom `domain` is `value`. */
  liveRoute(by: 'slug' | 'domain', value: string): Promise<EdgeRoute | null>;
  /** The successful deployment `dep_<shortId>…` of the site `slug` (a preview address). */
  previewRoute(slug: string, shortId: string): Promise<EdgeRoute | null>;
  /** Adds requests and bytes per site and minute (sites deleted meanwhile are left out). */
  addEdgeTraffic(rows: { siteId: string; minute: Date; requests: number; bytes: number }[]): Promise<void>;
  edgeTrafficSince(siteId: string, since: Date): Promise<{ requests: number; bytes: number }>;

  // ---------- encryption at rest ----------
  /** Sites whose environment is still stored in clear, with it as stored (JSON text). */
  clearEnvironments(): Promise<{ id: string; stored: string }[]>;
  /** Replaces a clear environment by `sealed` if it is still `stored`; true when it did. */
  replaceClearEnvironment(id: string, stored: string, sealed: string): Promise<boolean>;
}

// ---------- the MikroORM implementation ----------

/** The site list: the module's hot read, one prepared round trip for the page and its total (server/db/raw-page.ts). */
const SITE_LIST: RawPageSpec = {
  table: T.sites,
  select: `
    id, name, slug, domain, domain_verification_token, ${epochMs('domain_verified_at')} as verified_ms,
    status, ssl_enabled, framework, git_repo, branch, user_id,
    live_deployment_id, ${epochMs('live_deployment_at')} as live_ms, preview_deployment_id,
    ${epochMs('created_at')} as created_ms, ${epochMs('updated_at')} as updated_ms`,
  columns: {
    organization: 'organization_id',
    user: 'user_id',
    status: 'status',
    framework: 'framework',
  },
  counts: {
    list: T.sites,
    scope: 'organization',
    owner: 'user',
    dims: [
      { key: 'status', values: SITE_STATUSES },
      { key: 'framework', values: FRAMEWORKS },
    ],
  },
};

interface SiteListRow {
  id: string;
  name: string;
  slug: string;
  domain: string | null;
  domain_verification_token: string | null;
  verified_ms: number | string | null;
  status: SiteStatus;
  ssl_enabled: boolean;
  framework: Framework;
  git_repo: string;
  branch: string;
  user_id: string;
  live_deployment_id: string | null;
  live_ms: number | string | null;
  preview_deployment_id: string | null;
  created_ms: number | string;
  updated_ms: number | string;
}

function toSiteView(r: SiteListRow): SiteView {
  return {
    id: r.id,
    name: r.name,
    slug: r.slug,
    domain: r.domain,
    domainVerificationToken: r.domain_verification_token,
    domainVerifiedAt: ms(r.verified_ms),
    status: r.status,
    sslEnabled: r.ssl_enabled,
    framework: r.framework,
    gitRepo: r.git_repo,
    branch: r.branch,
    user: { id: r.user_id },
    liveDeploymentId: r.live_deployment_id,
    liveDeploymentAt: ms(r.live_ms),
    previewDeploymentId: r.preview_deployment_id,
    createdAt: ms(r.created_ms)!,
    updatedAt: ms(r.updated_ms)!,
  };
}

/** A site's deployment list's maintained counts (migration 30, list_counts). */
const DEPLOYMENT_COUNTS: ListCountSpec = {
  list: T.deployments,
  scope: 'site',
  dims: [{ key: 'status', values: DEPLOYMENT_STATUSES }],
};

interface LogRow {
  seq: number;
  ts_ms: number | string;
  stream: TLogLine['stream'];
  message: string;
}

const toLogLine = (r: LogRow): TLogLine => ({
  seq: Number(r.seq),
  timestamp: new Date(Number(r.ts_ms)).toISOString(),
  stream: r.stream,
  message: r.message,
});

export class MikroOrmHostingRepository extends MikroOrmRepository implements HostingRepository {
  snapshot<R>(em: Em, read: (tx: Em) => Promise<R>): Promise<R> {
    return em.transactional(read, { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true });
  }

  findSite(
    em: Em,
    actor: Actor,
    id: string,
    opts: { lock?: boolean; withEnvironment?: boolean } = {},
  ): Promise<HostingSite | null> {
    return em.findOne(
      HostingSite,
      { id, ...ownedBy(actor) },
      {
        ...(opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}),
        ...(opts.withEnvironment ? { populate: ['environmentVariables'] as never } : {}),
      },
    );
  }

  lockSite(tx: Em, id: string, opts: { withEnvironment?: boolean } = {}): Promise<HostingSite | null> {
    return tx.findOne(HostingSite, id, {
      lockMode: LockMode.PESSIMISTIC_WRITE,
      ...(opts.withEnvironment ? { populate: ['environmentVariables'] as never } : {}),
    });
  }

  siteForBuild(em: Em, id: string): Promise<HostingSite | null> {
    return em.findOne(HostingSite, id, { populate: ['environmentVariables'] as never });
  }

  async listSites(em: Em, filter: SiteListFilter, page: PageRequest): Promise<Paged<SiteView>> {
    const where: Record<string, unknown> = { organization: filter.organizationId };
    if (filter.userId) where.user = filter.userId;
    if (filter.none) where.id = { $in: [] };
    if (filter.status) where.status = filter.status;
    if (filter.framework) where.framework = filter.framework;
    const found = await findRawPage<SiteListRow>(em, this.db, SITE_LIST, where, page);
    return { total: found.total, hasMore: found.hasMore, items: found.rows.map(toSiteView) };
  }

  lockOwner(tx: Em, userId: string): Promise<void> {
    return lockOwner(tx, userId);
  }

  lockPlan(tx: Em, organizationId: string): Promise<OrganizationPlan> {
    return lockOrganizationPlan(tx, organizationId);
  }

  async lockedSiteCount(tx: Em, deps: AppDeps, organizationId: string): Promise<number> {
    await lockPlanCounter(tx, organizationId, 'hosting_sites');
    return deps.registry.usage.current(tx, organizationId, 'hosting_sites', deps.clock.now());
  }

  async domainTaken(tx: Em, domain: string, exceptSiteId?: string): Promise<boolean> {
    const n = await tx.count(HostingSite, {
      domain,
      domainVerifiedAt: { $ne: null },
      ...(exceptSiteId ? { id: { $ne: exceptSiteId } } : {}),
    });
    return n > 0;
  }

  async lockSlugBase(tx: Em, base: string): Promise<void> {
    await tx.execute('select pg_advisory_xact_lock(hashtext(?))', [`hosting-slug:${base}`]);
  }

  async slugsInUse(tx: Em, slugs: readonly string[]): Promise<Set<string>> {
    if (slugs.length === 0) return new Set();
    const rows = await tx.execute<{ slug: string }[]>(
      `select "slug" from "${T.sites}" where "slug" in (${slugs.map(() => '?').join(', ')})`,
      [...slugs],
    );
    return new Set(rows.map((r) => r.slug));
  }

  async previewInUse(tx: Em, slug: string, shortId: string): Promise<boolean> {
    const rows = await tx.execute<{ n: number }[]>(
      `select 1 as n from "${T.deployments}" d join "${T.sites}" s on s."id" = d."site_id"
        where s."slug" = ? and d."id" like ? limit 1`,
      [slug, `dep_${shortId}%`],
    );
    return rows.length > 0;
  }

  createSite(tx: Em, s: NewSite): HostingSite {
    return tx.create(HostingSite, {
      ...newSiteFields(s),
      organization: s.organizationId,
      user: tx.getReference(User, s.userId),
    });
  }

  removeSite(tx: Em, site: HostingSite): void {
    // The deployments and their logs go with it (foreign keys `on delete cascade`).
    tx.remove(site);
  }

  findDeployment(em: Em, siteId: string, id: string): Promise<HostingDeployment | null> {
    return em.findOne(HostingDeployment, { id, site: siteId });
  }

  deploymentsIn(em: Em, siteId: string, statuses: readonly DeploymentStatus[]): Promise<HostingDeployment[]> {
    return em.find(
      HostingDeployment,
      { site: siteId, status: { $in: [...statuses] } },
      { orderBy: { createdAt: 'asc', id: 'asc' } },
    );
  }

  countDeployments(em: Em, siteId: string, statuses: readonly DeploymentStatus[]): Promise<number> {
    return em.count(HostingDeployment, { site: siteId, status: { $in: [...statuses] } });
  }

  async buildShare(tx: Em, organizationId: string): Promise<{ building: number; othersWaiting: boolean }> {
    // A transaction-scoped advisory lock: the organization's row stays free for everything else.
    await tx.execute(`select pg_advisory_xact_lock(${BUILD_SHARE_LOCK}, hashtext(?))`, [organizationId]);
    const [row] = await tx.execute<{ building: number | string; others: boolean }[]>(
      `select
         (select count(*) from "${T.deployments}" d join "${T.sites}" s on s."id" = d."site_id"
           where s."organization_id" = ? and d."status" = 'building') as "building",
         exists (
           select 1 from "${T.deployments}" q join "${T.sites}" qs on qs."id" = q."site_id"
            where q."status" = 'queued' and qs."organization_id" <> ?
              and not exists (
                select 1 from "${T.deployments}" b join "${T.sites}" bs on bs."id" = b."site_id"
                 where b."status" = 'building' and bs."organization_id" = qs."organization_id")
         ) as "others"`,
      [organizationId, organizationId],
    );
    return { building: Number(row?.building ?? 0), othersWaiting: row?.others === true };
  }

  async deploymentIds(em: Em, siteId: string): Promise<string[]> {
    const rows = await em.execute<{ id: string }[]>(
      `select "id" from "${T.deployments}" where "site_id" = ?`,
      [siteId],
    );
    return rows.map((r) => r.id);
  }

  async existingDeployments(em: Em, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await em.execute<{ id: string }[]>(
      `select "id" from "${T.deployments}" where "id" in (${ids.map(() => '?').join(', ')})`,
      [...ids],
    );
    return new Set(rows.map((r) => r.id));
  }

  createDeployment(tx: Em, d: NewDeployment): HostingDeployment {
    return tx.create(HostingDeployment, newDeploymentFields(d));
  }

  listDeployments(
    em: Em,
    siteId: string,
    status: DeploymentStatus | undefined,
    page: PageRequest,
  ): Promise<Paged<HostingDeployment>> {
    const filter = { site: siteId, ...(status ? { status } : {}) };
    return findPage(em, HostingDeployment, filter, page, { counted: { spec: DEPLOYMENT_COUNTS, filter } });
  }

  async deploymentStatus(id: string): Promise<DeploymentStatus | null> {
    const rows = await this.fork().execute<{ status: DeploymentStatus }[]>(
      `select "status" from "${T.deployments}" where "id" = ?`,
      [id],
    );
    return rows[0]?.status ?? null;
  }

  async sitesWithUnfinishedBuilds(): Promise<string[]> {
    const rows = await this.fork().execute<{ site_id: string }[]>(
      `select distinct "site_id" from "${T.deployments}" where "status" in (${UNFINISHED_STATUSES.map(() => '?').join(', ')})`,
      [...UNFINISHED_STATUSES],
    );
    return rows.map((r) => r.site_id);
  }

  async appendLogLines(
    tx: Em,
    deploymentId: string,
    lastSeq: number,
    output: readonly BuildOutput[],
    now: Date,
  ): Promise<TLogLine[]> {
    if (output.length === 0) return [];
    const lines = output.map((o, i) => ({
      seq: lastSeq + i + 1,
      timestamp: now.toISOString(),
      stream: o.stream,
      message: o.message,
    }));
    await tx.execute(
      `insert into "${T.buildLogs}" ("deployment_id", "seq", "timestamp", "stream", "message") values ${lines
        .map(() => '(?, ?, ?, ?, ?)')
        .join(', ')}`,
      lines.flatMap((l) => [deploymentId, l.seq, now, l.stream, l.message]),
    );
    return lines;
  }

  async readLogLines(
    em: Em,
    deploymentId: string,
    after: number,
    limit: number,
    upTo = 2_147_483_647,
  ): Promise<TLogLine[]> {
    const rows = await em.execute<LogRow[]>(
      `select "seq", ${epochMs('timestamp')} as "ts_ms", "stream", "message"
         from "${T.buildLogs}"
        where "deployment_id" = ? and "seq" > ? and "seq" <= ?
        order by "seq" limit ?`,
      [deploymentId, after, upTo, limit],
    );
    return rows.map(toLogLine);
  }

  async notify(tx: Em, channel: string, payload: string): Promise<void> {
    if (this.db.kind !== 'postgresql') return;
    await tx.execute('select pg_notify(?, ?)', [channel, payload]);
  }

  addUsageRecord(tx: Em, r: UsageRecord): void {
    tx.create(HostingUsageRecord, {
      resourceId: r.resourceId,
      organization: r.organizationId,
      kind: r.kind,
      siteId: r.siteId,
      startedAt: r.startedAt,
      endedAt: r.endedAt,
    });
  }

  async liveRoute(by: 'slug' | 'domain', value: string): Promise<EdgeRoute | null> {
    const rows = await this.fork().execute<{ id: string; live_deployment_id: string | null }[]>(
      by === 'slug'
        ? `select "id", "live_deployment_id" from "${T.sites}" where "slug" = ? limit 1`
        : // A pending domain is not served (docs/sites.md, "Custom domains").
          `select "id", "live_deployment_id" from "${T.sites}" where "domain" = ? and "domain_verified_at" is not null limit 1`,
      [value],
    );
    const r = rows[0];
    return r?.live_deployment_id ? { siteId: r.id, deploymentId: r.live_deployment_id } : null;
  }

  async previewRoute(slug: string, shortId: string): Promise<EdgeRoute | null> {
    const prefix = `dep_${shortId}`;
    const rows = await this.fork().execute<{ id: string; site_id: string }[]>(
      `select d."id", d."site_id" from "${T.deployments}" d join "${T.sites}" s on s."id" = d."site_id"
        where s."slug" = ? and left(d."id", ?) = ? and d."status" = 'success' limit 1`,
      [slug, prefix.length, prefix],
    );
    return rows[0] ? { siteId: rows[0].site_id, deploymentId: rows[0].id } : null;
  }

  async addEdgeTraffic(
    rows: { siteId: string; minute: Date; requests: number; bytes: number }[],
  ): Promise<void> {
    if (rows.length === 0) return;
    await this.fork().execute(
      `insert into "${T.edgeTraffic}" ("site_id", "minute", "requests", "bytes")
       select v.site_id, v.minute::timestamptz, v.requests::bigint, v.bytes::bigint
         from (values ${rows.map(() => '(?, ?, ?, ?)').join(', ')}) as v(site_id, minute, requests, bytes)
        where exists (select 1 from "${T.sites}" s where s."id" = v.site_id)
       on conflict ("site_id", "minute") do update
         set "requests" = "${T.edgeTraffic}"."requests" + excluded."requests",
             "bytes" = "${T.edgeTraffic}"."bytes" + excluded."bytes"`,
      rows.flatMap((r) => [r.siteId, r.minute, r.requests, r.bytes]),
    );
  }

  async edgeTrafficSince(siteId: string, since: Date): Promise<{ requests: number; bytes: number }> {
    const rows = await this.fork().execute<
      { requests: string | number | null; bytes: string | number | null }[]
    >(
      `select sum("requests") as "requests", sum("bytes") as "bytes" from "${T.edgeTraffic}"
        where "site_id" = ? and "minute" > ?`,
      [siteId, since],
    );
    return { requests: Number(rows[0]?.requests ?? 0), bytes: Number(rows[0]?.bytes ?? 0) };
  }

  async clearEnvironments(): Promise<{ id: string; stored: string }[]> {
    return this.fork().execute<{ id: string; stored: string }[]>(
      `select "id", "environment_variables"::text as "stored" from "${T.sites}"
        where json_typeof("environment_variables") = 'object'`,
    );
  }

  async replaceClearEnvironment(id: string, stored: string, sealed: string): Promise<boolean> {
    const updated = await this.fork().execute<{ id: string }[]>(
      `update "${T.sites}" set "environment_variables" = ?::json
        where "id" = ? and "environment_variables"::text = ?
       returning "id"`,
      [JSON.stringify(sealed), id, stored],
    );
    return updated.length > 0;
  }
}

// ---------- what the manifest and the usage report read (they receive an Em, not the runtime) ----------

/** The module's share of an organization's rows, children first (server/kit/organization-hooks.ts). */
export const HOSTING_ORGANIZATION_ROWS: OrganizationRows = {
  remove: [
    {
      table: T.buildLogs,
      where: `"deployment_id" in (select d."id" from "${T.deployments}" d join "${T.sites}" s on s."id" = d."site_id" where s."organization_id" = ?)`,
    },
    {
      table: T.edgeTraffic,
      where: `"site_id" in (select "id" from "${T.sites}" where "organization_id" = ?)`,
    },
    {
      table: T.deployments,
      where: `"site_id" in (select "id" from "${T.sites}" where "organization_id" = ?)`,
    },
    { table: T.sites },
    { table: T.usageRecords },
  ],
};

/** Sites of an organization, from the list's maintained counts (docs/api-conventions.md, "Lists"), not a count of the rows. */
export function countSites(em: Em, organizationId: string): Promise<number> {
  return countedRows(em, T.sites, organizationId);
}

/** What the usage report reads of an organization for `window` (hosting.usage.ts). */
export async function usageRows(
  em: Em,
  organizationId: string,
  window: { start: Date; end: Date },
): Promise<{
  sites: { id: string; created_at: Date | string; live_since: Date | string | null }[];
  records: { kind: 'build' | 'site'; site_id: string; started_at: Date | string; ended_at: Date | string }[];
  running: { started_at: Date | string }[];
}> {
  const sites = await em.execute<
    { id: string; created_at: Date | string; live_since: Date | string | null }[]
  >(`select "id", "created_at", "live_since" from "${T.sites}" where "organization_id" = ?`, [
    organizationId,
  ]);
  const records = await em.execute<
    { kind: 'build' | 'site'; site_id: string; started_at: Date | string; ended_at: Date | string }[]
  >(
    `select "kind", "site_id", "started_at", "ended_at" from "${T.usageRecords}"
      where "organization_id" = ? and "ended_at" > ? and "started_at" < ?`,
    [organizationId, window.start, window.end],
  );
  const running = await em.execute<{ started_at: Date | string }[]>(
    `select d."started_at" from "${T.deployments}" d join "${T.sites}" s on s."id" = d."site_id"
      where s."organization_id" = ? and d."status" = 'building' and d."started_at" is not null`,
    [organizationId],
  );
  return { sites, records, running };
}

/** The fields of a new site but its organization and user (references differ by repository). */
export function newSiteFields(s: NewSite) {
  return {
    id: s.id,
    createdAt: s.now,
    updatedAt: s.now,
    name: s.name,
    slug: s.slug,
    domain: s.domain,
    domainVerificationToken: s.domainVerificationToken,
    domainVerifiedAt: null,
    gitRepo: s.gitRepo,
    branch: s.branch,
    framework: s.framework,
    buildCommand: s.buildCommand,
    outputDirectory: s.outputDirectory,
    nodeVersion: s.nodeVersion,
    environmentVariables: s.environmentVariables,
    status: 'active' as const,
    sslEnabled: true,
    liveDeploymentId: null,
    liveDeploymentAt: null,
    previewDeploymentId: null,
    liveSince: null,
    buildTicket: 0,
  };
}

/** The fields of a new deployment (queued, with the site's build settings of now). */
export function newDeploymentFields(d: NewDeployment) {
  const { site } = d;
  return {
    id: d.id,
    createdAt: d.now,
    updatedAt: d.now,
    site,
    status: 'queued' as const,
    branch: d.branch,
    commit: d.commit,
    commitPinned: d.commitPinned,
    builder: d.builder,
    message: d.message,
    statusMessage: null,
    // The build settings of the site now: a later change applies to the next deployment.
    gitRepo: site.gitRepo,
    framework: site.framework,
    buildCommand: site.buildCommand,
    outputDirectory: site.outputDirectory,
    nodeVersion: site.nodeVersion,
    buildStep: 0,
    logSeq: 0,
    startedAt: null,
    completedAt: null,
  };
}
