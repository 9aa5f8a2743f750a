import { LockMode, UniqueConstraintViolationException } from '@mikro-orm/core';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import { lockOwner } from '../../access/owned-resources.js';
import { actsOnWholeOrganization, ownedBy, ownedListFilter } from '../../access/scope.js';
import { User } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import { assertWithinPlan } from '../../kit/plan-limit.js';
import { AppError } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import { checkTargetUrl } from '../../lib/safe-http.js';
import { resolveGitTarget } from './git-fetch.js';
import { edgeRoutesChanged } from './edge.js';
import { edgeTraffic24h } from './edge-traffic.js';
import {
  DEFAULT_BRANCH,
  DEFAULT_NODE_VERSION,
  FRAMEWORK_DEFAULTS,
  LIMITS,
  SHORT_ID_LENGTH,
} from './hosting.constants.js';
import { toSiteDetailDto, toSiteDto } from './hosting.dto.js';
import { openEnvironment, sealEnvironment } from './site-environment.js';
import { HostingDeployment } from './hosting-deployment.entity.js';
import { HostingSite } from './hosting-site.entity.js';
import { HostingUsageRecord } from './hosting-usage-record.entity.js';
import { findSitePage } from './hosting.queries.js';
import type {
  TCreateSiteInput,
  TDeleteSiteOutput,
  TListSitesInput,
  TListSitesOutput,
  TSiteIdInput,
  TSiteOutput,
  TUpdateSiteInput,
} from './hosting.schema.js';

export function siteNotFound(): AppError {
  return new AppError('NOT_FOUND', 'Site not found');
}

/**
 * The caller's site `id` (another organization's, or for a member another user's, is not found), with its
 * environment variables loaded; locked for update inside a transaction when `lock` is set.
 */
export async function findSiteOrThrow(
  ctx: { em: Em; actor: ActorContext['actor'] },
  id: string,
  opts: { lock?: boolean; withEnvironment?: boolean } = {},
): Promise<HostingSite> {
  if (!isId('site', id)) throw siteNotFound();
  const site = await ctx.em.findOne(
    HostingSite,
    { id, ...ownedBy(ctx.actor) },
    {
      ...(opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}),
      ...(opts.withEnvironment ? { populate: ['environmentVariables'] as never } : {}),
    },
  );
  if (!site) throw siteNotFound();
  return site;
}

// ---------- rules that need more than the schema ----------

function invalid(path: string, problem: string): AppError {
  return new AppError('VALIDATION_ERROR', `Invalid request: ${path}: ${problem}`, {
    details: [{ path, message: problem }],
  });
}

/**
 * `git_repo`: `https://`, no credentials, and a host that is not and does not resolve to an internal address: the
 * address rules of webhook URLs (server/lib/safe-http.ts; `WEBHOOK_ALLOW_PRIVATE_TARGETS` relaxes both alike, cloud
 * metadata and link-local addresses stay refused, and allows `http://` to the loopback and private hosts it admits,
 * for local testing). Every build checks again before fetching (git-fetch.ts).
 */
export async function assertGitRepo(deps: AppDeps, url: string): Promise<void> {
  const policy = { allowPrivate: deps.config.webhook.allowPrivateTargets };
  const check = await checkTargetUrl(url, policy);
  if (!check.ok) throw invalid('git_repo', check.reason);
  if (check.url.protocol !== 'https:') {
    const target = policy.allowPrivate ? await resolveGitTarget(url, policy) : undefined;
    if (!target?.ok) throw invalid('git_repo', 'must use https://');
  }
}

/** Addresses under `SITES_DOMAIN` are the platform's own (`<slug>.<SITES_DOMAIN>`): not a custom domain. */
function assertDomainAllowed(deps: AppDeps, domain: string): void {
  const own = deps.config.sitesDomain;
  if (domain === own || domain.endsWith(`.${own}`)) {
    throw invalid('domain', `addresses under ${own} are given to sites by the platform (see \`url\`)`);
  }
}

function domainTaken(domain: string): AppError {
  return new AppError('CONFLICT', `The domain ${domain} is already used by another site`, {
    details: [{ path: 'domain', message: 'Already used by another site' }],
  });
}

/** The domain is free across every organization (the unique index settles a race; see `withDomainConflict`). */
async function assertDomainFree(tx: Em, domain: string, exceptSiteId?: string): Promise<void> {
  const taken = await tx.count(HostingSite, {
    domain,
    ...(exceptSiteId ? { id: { $ne: exceptSiteId } } : {}),
  });
  if (taken > 0) throw domainTaken(domain);
}

/**
 * The unique index on `domain` refused the insert or update: two sites claimed one domain at the same instant. Told
 * by PostgreSQL's SQLSTATE and the constraint's name rather than by the ORM's exception class alone, which a second
 * copy of the ORM in the process would not match.
 */
function isDomainClash(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown; message?: unknown } | null;
  if (!e) return false;
  const unique = err instanceof UniqueConstraintViolationException || e.code === '23505';
  return (
    unique &&
    (e.constraint === 'hosting_sites_domain_unique' || /hosting_sites_domain_unique/.test(String(e.message)))
  );
}

async function withDomainConflict<T>(domain: string | null | undefined, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (domain && isDomainClash(err)) throw domainTaken(domain);
    throw err;
  }
}

// ---------- the site address ----------

/** `My Shop!` → `my-shop`: lower-case letters and digits joined by single hyphens, at most 40 characters. */
export function slugify(name: string): string {
  const base = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+/, '')
    .slice(0, LIMITS.slugLength)
    .replace(/-+$/, '');
  return base || 'site';
}

const PREVIEW_LABEL = new RegExp(`^(.+)-([a-z0-9]{${SHORT_ID_LENGTH}})$`);

/** True when `label` is the preview address of an existing deployment (`<slug>-<short id>`). */
export async function isPreviewLabel(tx: Em, label: string): Promise<boolean> {
  const m = PREVIEW_LABEL.exec(label);
  if (!m) return false;
  const rows = await tx.execute<{ n: number }[]>(
    `select 1 as n from "hosting_deployments" d join "hosting_sites" s on s."id" = d."site_id"
      where s."slug" = ? and d."id" like ? limit 1`,
    [m[1], `dep_${m[2]}%`],
  );
  return rows.length > 0;
}

/**
 * A slug no site uses and no deployment's preview address uses: `base`, else `base-2`, `base-3`, ... Creates with
 * the same base queue on a transaction-scoped advisory lock, so two organizations naming a site alike at the same
 * moment get different addresses instead of a conflict.
 */
async function uniqueSlug(tx: Em, base: string): Promise<string> {
  await tx.execute('select pg_advisory_xact_lock(hashtext(?))', [`hosting-slug:${base}`]);
  for (let start = 1; ; start += 50) {
    const candidates = Array.from({ length: 50 }, (_, i) => {
      const n = start + i;
      const suffix = n === 1 ? '' : `-${n}`;
      return base.slice(0, LIMITS.slugLength - suffix.length).replace(/-+$/, '') + suffix;
    });
    const rows = await tx.execute<{ slug: string }[]>(
      `select "slug" from "hosting_sites" where "slug" in (${candidates.map(() => '?').join(', ')})`,
      candidates,
    );
    const taken = new Set(rows.map((r) => r.slug));
    for (const candidate of candidates) {
      if (!taken.has(candidate) && !(await isPreviewLabel(tx, candidate))) return candidate;
    }
  }
}

// ---------- use cases ----------

export async function listSites(ctx: ActorContext, input: TListSitesInput): Promise<TListSitesOutput> {
  const { actor } = ctx;
  // Owners and admins see the organization's sites (or one user's); members their own.
  const where: Record<string, unknown> = actsOnWholeOrganization(actor)
    ? { organization: actor.organizationId, ...(input.user_id ? { user: input.user_id } : {}) }
    : ownedListFilter(actor, { userId: input.user_id });
  if (input.status) where.status = input.status;
  if (input.framework) where.framework = input.framework;
  const request = pageRequest(input);
  const found = await findSitePage(ctx.em, ctx.deps.db, where, request);
  const domain = ctx.deps.config.sitesDomain;
  return {
    success: true,
    sites: found.items.map((s) => toSiteDto(s, domain)),
    ...pageFields(request, found),
  };
}

export async function getSite(ctx: ActorContext, input: TSiteIdInput): Promise<TSiteOutput> {
  const site = await findSiteOrThrow(ctx, input.id, { withEnvironment: true });
  const now = ctx.deps.clock.now();
  // Sites built for real report what the edge served (edge-traffic.ts).
  const served =
    ctx.deps.config.hosting.builder === 'local' ? await edgeTraffic24h(ctx.deps, site.id, now) : undefined;
  return {
    success: true,
    site: toSiteDetailDto(
      site,
      ctx.deps.config.sitesDomain,
      now,
      openEnvironment(ctx.deps, site.environmentVariables),
      served,
    ),
  };
}

export async function createSite(ctx: ActorContext, input: TCreateSiteInput): Promise<TSiteOutput> {
  const { actor, deps } = ctx;
  const domain = input.domain ?? null;
  if (domain) assertDomainAllowed(deps, domain);
  await assertGitRepo(deps, input.git_repo);
  const defaults = FRAMEWORK_DEFAULTS[input.framework];

  const site = await withDomainConflict(domain, () =>
    ctx.em.transactional(async (tx) => {
      const now = deps.clock.now();
      await lockOwner(tx, actor.userId);
      await assertWithinPlan(tx, deps, actor.organizationId, 'hosting_sites');
      if (domain) await assertDomainFree(tx, domain);
      const slug = await uniqueSlug(tx, slugify(input.name));
      return tx.create(HostingSite, {
        id: newId('site'),
        createdAt: now,
        updatedAt: now,
        organization: actor.organizationId,
        user: tx.getReference(User, actor.userId),
        name: input.name,
        slug,
        domain,
        gitRepo: input.git_repo,
        branch: input.branch ?? DEFAULT_BRANCH,
        framework: input.framework,
        buildCommand: input.build_command ?? defaults.buildCommand,
        outputDirectory: input.output_directory ?? defaults.outputDirectory,
        nodeVersion: input.node_version ?? DEFAULT_NODE_VERSION,
        environmentVariables: sealEnvironment(deps, input.environment_variables ?? {}),
        status: 'active',
        sslEnabled: true,
        liveDeploymentId: null,
        liveDeploymentAt: null,
        previewDeploymentId: null,
        liveSince: null,
        buildTicket: 0,
      });
    }),
  );
  return {
    success: true,
    site: toSiteDetailDto(site, deps.config.sitesDomain, deps.clock.now(), input.environment_variables ?? {}),
  };
}

export async function updateSite(ctx: ActorContext, input: TUpdateSiteInput): Promise<TSiteOutput> {
  const { deps } = ctx;
  if (input.domain) assertDomainAllowed(deps, input.domain);
  if (input.git_repo !== undefined) await assertGitRepo(deps, input.git_repo);
  const site = await withDomainConflict(input.domain, () =>
    ctx.em.transactional(async (tx) => {
      const s = await findSiteOrThrow({ em: tx, actor: ctx.actor }, input.id, {
        lock: true,
        withEnvironment: true,
      });
      const now = deps.clock.now();
      if (input.domain !== undefined && input.domain !== s.domain) {
        if (input.domain) await assertDomainFree(tx, input.domain, s.id);
        s.domain = input.domain;
      }
      if (input.name !== undefined) s.name = input.name;
      if (input.git_repo !== undefined) s.gitRepo = input.git_repo;
      if (input.branch !== undefined) s.branch = input.branch;
      if (input.framework !== undefined) s.framework = input.framework;
      if (input.build_command !== undefined) s.buildCommand = input.build_command;
      if (input.output_directory !== undefined) s.outputDirectory = input.output_directory;
      if (input.node_version !== undefined) s.nodeVersion = input.node_version;
      // Rewritten encrypted on every update, so that a set stored in clear before encryption at rest is sealed too.
      const environment = input.environment_variables ?? openEnvironment(deps, s.environmentVariables);
      s.environmentVariables = sealEnvironment(deps, environment);
      s.updatedAt = now;
      return { s, environment };
    }),
  );
  if (input.domain !== undefined) edgeRoutesChanged(deps);
  return {
    success: true,
    site: toSiteDetailDto(site.s, deps.config.sitesDomain, deps.clock.now(), site.environment),
  };
}

/**
 * Deletes a site with its deployments and logs; its custom domain is free again at once. Builds in progress stop
 * (their followers get `end` with `canceled`); the time the site served and its builds ran stays in the usage report.
 */
export async function deleteSite(ctx: ActorContext, input: TSiteIdInput): Promise<TDeleteSiteOutput> {
  const { deps } = ctx;
  const { site, unfinished } = await ctx.em.transactional(async (tx) => {
    const s = await findSiteOrThrow({ em: tx, actor: ctx.actor }, input.id, { lock: true });
    const now = deps.clock.now();
    const pending = await tx.find(HostingDeployment, { site: s.id, status: { $in: ['queued', 'building'] } });
    for (const d of pending) {
      if (!d.startedAt) continue;
      tx.create(HostingUsageRecord, {
        resourceId: d.id,
        organization: s.organization,
        kind: 'build',
        siteId: s.id,
        startedAt: d.startedAt,
        endedAt: now,
      });
    }
    if (s.liveSince) {
      tx.create(HostingUsageRecord, {
        resourceId: s.id,
        organization: s.organization,
        kind: 'site',
        siteId: s.id,
        startedAt: s.liveSince,
        endedAt: now,
      });
    }
    const hub = deps.modules.hosting.logHub;
    for (const d of pending) await hub.announce(tx, { deploymentId: d.id, lines: [], status: 'canceled' });
    // The deployments and their logs go with it (foreign keys `on delete cascade`).
    tx.remove(s);
    return { site: s, unfinished: pending.map((d) => d.id) };
  });
  for (const id of unfinished)
    deps.modules.hosting.logHub.publish({ deploymentId: id, lines: [], status: 'canceled' });
  // No longer served, at once in this process (others within a second, edge.ts).
  edgeRoutesChanged(deps);
  return { success: true, message: 'Site deleted', id: site.id, domain: site.domain ?? null };
}
