import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import { actsOnWholeOrganization } from '../../access/scope.js';
import type { Em } from '../../db/orm.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import { assertWithinPlan } from '../../kit/plan-limit.js';
import { assertDomainRecord, newVerificationToken } from '../../lib/domain-verification.js';
import { conflict, notFound, validation } from '../../lib/errors.js';
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
import { UNFINISHED_STATUSES } from './deployment-state.js';
import type { HostingSite } from './hosting-site.entity.js';
import type { HostingRepository, SiteListFilter } from './hosting.repository.js';
import type {
  TCreateSiteInput,
  TDeleteSiteOutput,
  TListSitesInput,
  TListSitesOutput,
  TSiteIdInput,
  TSiteOutput,
  TUpdateSiteInput,
  TVerifyDomainInput,
} from './hosting.schema.js';

const siteNotFound = () => notFound('Site');

/**
 * The caller's site `id` (another organization's, or for a member another user's, is not found), with its
 * environment variables loaded when `withEnvironment` is set; locked for update inside a transaction when `lock` is.
 */
export async function findSiteOrThrow(
  ctx: { em: Em; actor: ActorContext['actor']; deps: AppDeps },
  id: string,
  opts: { lock?: boolean; withEnvironment?: boolean } = {},
): Promise<HostingSite> {
  if (!isId('site', id)) throw siteNotFound();
  const site = await repositoryOf(ctx.deps, 'hosting').findSite(ctx.em, ctx.actor, id, opts);
  if (!site) throw siteNotFound();
  return site;
}

// ---------- rules that need more than the schema ----------

/**
 * `git_repo`: `https://`, no credentials, and a host that is not and does not resolve to an internal address: the
 * address rules of webhook URLs (server/lib/safe-http.ts; `WEBHOOK_ALLOW_PRIVATE_TARGETS` relaxes both alike, cloud
 * metadata and link-local addresses stay refused, and allows `http://` to the loopback and private hosts it admits,
 * for local testing). Every build checks again before fetching (git-fetch.ts).
 */
export async function assertGitRepo(deps: AppDeps, url: string): Promise<void> {
  const policy = { allowPrivate: deps.config.webhook.allowPrivateTargets };
  const check = await checkTargetUrl(url, policy);
  if (!check.ok) throw validation('git_repo', check.reason);
  if (check.url.protocol !== 'https:') {
    const target = policy.allowPrivate ? await resolveGitTarget(url, policy) : undefined;
    if (!target?.ok) throw validation('git_repo', 'must use https://');
  }
}

/** Addresses under `SITES_DOMAIN` are the platform's own (`<slug>.<SITES_DOMAIN>`): not a custom domain. */
function assertDomainAllowed(deps: AppDeps, domain: string): void {
  const own = deps.config.sitesDomain;
  if (domain === own || domain.endsWith(`.${own}`)) {
    throw validation('domain', `addresses under ${own} are given to sites by the platform (see \`url\`)`);
  }
}

function domainTaken(domain: string) {
  return conflict(`The domain ${domain} is already verified by another site`, [
    { path: 'domain', message: 'Already verified by another site' },
  ]);
}

/**
 * No other site has verified the domain (pending claims of other sites do not block it); the partial unique index on
 * verified domains settles a race (see `withDomainConflict`).
 */
async function assertDomainFree(
  repository: HostingRepository,
  tx: Em,
  domain: string,
  exceptSiteId?: string,
): Promise<void> {
  if (await repository.domainTaken(tx, domain, exceptSiteId)) throw domainTaken(domain);
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
    (e.constraint === 'hosting_sites_verified_domain_unique' ||
      /hosting_sites_verified_domain_unique/.test(String(e.message)))
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
async function isPreviewLabel(repository: HostingRepository, tx: Em, label: string): Promise<boolean> {
  const m = PREVIEW_LABEL.exec(label);
  return m ? repository.previewInUse(tx, m[1]!, m[2]!) : false;
}

/**
 * A slug no site uses and no deployment's preview address uses: `base`, else `base-2`, `base-3`, ... Creates with
 * the same base queue on a transaction-scoped advisory lock, so two organizations naming a site alike at the same
 * moment get different addresses instead of a conflict.
 */
async function uniqueSlug(repository: HostingRepository, tx: Em, base: string): Promise<string> {
  await repository.lockSlugBase(tx, base);
  for (let start = 1; ; start += 50) {
    const candidates = Array.from({ length: 50 }, (_, i) => {
      const n = start + i;
      const suffix = n === 1 ? '' : `-${n}`;
      return base.slice(0, LIMITS.slugLength - suffix.length).replace(/-+$/, '') + suffix;
    });
    const taken = await repository.slugsInUse(tx, candidates);
    for (const candidate of candidates) {
      if (!taken.has(candidate) && !(await isPreviewLabel(repository, tx, candidate))) return candidate;
    }
  }
}

// ---------- use cases ----------

export async function listSites(ctx: ActorContext, input: TListSitesInput): Promise<TListSitesOutput> {
  const { actor } = ctx;
  // Owners and admins see the organization's sites (or one user's); members their own.
  const whole = actsOnWholeOrganization(actor);
  const wanted = input.user_id ?? (whole ? undefined : actor.userId);
  const filter: SiteListFilter = {
    organizationId: actor.organizationId,
    ...(wanted ? { userId: wanted } : {}),
    // A member naming anyone but themselves gets an empty list (access/scope.ts, ownedListFilter).
    ...(!whole && wanted !== actor.userId ? { userId: actor.userId, none: true } : {}),
    ...(input.status ? { status: input.status } : {}),
    ...(input.framework ? { framework: input.framework } : {}),
  };
  const request = pageRequest(input);
  const found = await repositoryOf(ctx.deps, 'hosting').listSites(ctx.em, filter, request);
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
  const repository = repositoryOf(deps, 'hosting');

  const site = await withDomainConflict(domain, () =>
    repository.transaction(ctx.em, async (tx) => {
      const now = deps.clock.now();
      await repository.lockOwner(tx, actor.userId);
      await assertWithinPlan(await repository.lockPlan(tx, actor.organizationId), 'hosting_sites', () =>
        repository.lockedSiteCount(tx, deps, actor.organizationId),
      );
      if (domain) await assertDomainFree(repository, tx, domain);
      const slug = await uniqueSlug(repository, tx, slugify(input.name));
      return repository.createSite(tx, {
        id: newId('site'),
        now,
        organizationId: actor.organizationId,
        userId: actor.userId,
        name: input.name,
        slug,
        domain,
        domainVerificationToken: domain ? newVerificationToken() : null,
        gitRepo: input.git_repo,
        branch: input.branch ?? DEFAULT_BRANCH,
        framework: input.framework,
        buildCommand: input.build_command ?? defaults.buildCommand,
        outputDirectory: input.output_directory ?? defaults.outputDirectory,
        nodeVersion: input.node_version ?? DEFAULT_NODE_VERSION,
        environmentVariables: sealEnvironment(deps, input.environment_variables ?? {}),
      });
    }),
  );
  // Its address (and domain) may have been remembered as serving nothing (edge.ts).
  edgeRoutesChanged(deps);
  return {
    success: true,
    site: toSiteDetailDto(site, deps.config.sitesDomain, deps.clock.now(), input.environment_variables ?? {}),
  };
}

export async function updateSite(ctx: ActorContext, input: TUpdateSiteInput): Promise<TSiteOutput> {
  const { deps } = ctx;
  if (input.domain) assertDomainAllowed(deps, input.domain);
  if (input.git_repo !== undefined) await assertGitRepo(deps, input.git_repo);
  const repository = repositoryOf(deps, 'hosting');
  const site = await withDomainConflict(input.domain, () =>
    repository.transaction(ctx.em, async (tx) => {
      const s = await findSiteOrThrow({ em: tx, actor: ctx.actor, deps }, input.id, {
        lock: true,
        withEnvironment: true,
      });
      const now = deps.clock.now();
      if (input.domain !== undefined && input.domain !== s.domain) {
        if (input.domain) await assertDomainFree(repository, tx, input.domain, s.id);
        // A new domain starts pending, with a token of its own: verifying the old one proves nothing of it.
        s.domain = input.domain;
        s.domainVerificationToken = input.domain ? newVerificationToken() : null;
        s.domainVerifiedAt = null;
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
  edgeRoutesChanged(deps);
  return {
    success: true,
    site: toSiteDetailDto(site.s, deps.config.sitesDomain, deps.clock.now(), site.environment),
  };
}

/**
 * Verifies the site's custom domain (docs/sites.md, "Custom domains"): its TXT record `_cloud-platform.<domain>` must
 * hold the site's token. The lookup runs outside any transaction; the claim is then made in one, against the site as
 * it is by then (a domain changed meanwhile is not verified), and the partial unique index makes it atomic: of two
 * sites verifying one domain at once, one wins and the other gets 409. Verifying a verified domain changes nothing.
 */
export async function verifyDomain(ctx: ActorContext, input: TVerifyDomainInput): Promise<TSiteOutput> {
  const { deps } = ctx;
  const repository = repositoryOf(deps, 'hosting');
  const site = await findSiteOrThrow(ctx, input.id);
  const domain = site.domain;
  const token = site.domainVerificationToken;
  if (!domain || !token) {
    throw conflict('The site has no custom domain: set one with PUT /v1/hosting/sites/{id} first', [
      { path: 'domain', message: 'No custom domain to verify' },
    ]);
  }
  if (!site.domainVerifiedAt) {
    await assertDomainRecord(deps.config.dnsServers, domain, token);
    await withDomainConflict(domain, () =>
      repository.transaction(ctx.em, async (tx) => {
        const s = await findSiteOrThrow({ em: tx, actor: ctx.actor, deps }, input.id, { lock: true });
        if (s.domain !== domain || s.domainVerificationToken !== token) {
          throw conflict('The domain of the site changed while it was being verified: verify again', [
            { path: 'domain', message: 'Changed during the verification' },
          ]);
        }
        if (s.domainVerifiedAt) return;
        if (await repository.domainTaken(tx, domain, s.id)) throw domainTaken(domain);
        const now = deps.clock.now();
        s.domainVerifiedAt = now;
        s.updatedAt = now;
      }),
    );
    // Served at once in this process (others within a second, edge.ts).
    edgeRoutesChanged(deps);
  }
  return getSite(ctx, input);
}

/**
 * Deletes a site with its deployments and logs; its custom domain is free again at once. Builds in progress stop
 * (their followers get `end` with `canceled`); the time the site served and its builds ran stays in the usage report.
 * Its artifacts leave the store, with the contents no other deployment uses (artifact-store.ts).
 */
export async function deleteSite(ctx: ActorContext, input: TSiteIdInput): Promise<TDeleteSiteOutput> {
  const { deps } = ctx;
  const { repository, logHub } = runtimeOf(deps, 'hosting');
  const { site, unfinished, deployments } = await repository.transaction(ctx.em, async (tx) => {
    const s = await findSiteOrThrow({ em: tx, actor: ctx.actor, deps }, input.id, { lock: true });
    const now = deps.clock.now();
    const pending = await repository.deploymentsIn(tx, s.id, UNFINISHED_STATUSES);
    for (const d of pending) {
      if (!d.startedAt) continue;
      repository.addUsageRecord(tx, {
        resourceId: d.id,
        organizationId: s.organization.id,
        kind: 'build',
        siteId: s.id,
        startedAt: d.startedAt,
        endedAt: now,
      });
    }
    if (s.liveSince) {
      repository.addUsageRecord(tx, {
        resourceId: s.id,
        organizationId: s.organization.id,
        kind: 'site',
        siteId: s.id,
        startedAt: s.liveSince,
        endedAt: now,
      });
    }
    for (const d of pending) await logHub.announce(tx, { deploymentId: d.id, lines: [], status: 'canceled' });
    const deployments = await repository.deploymentIds(tx, s.id);
    repository.removeSite(tx, s);
    return { site: s, unfinished: pending.map((d) => d.id), deployments };
  });
  for (const id of unfinished) logHub.publish({ deploymentId: id, lines: [], status: 'canceled' });
  // No longer served, at once in this process (others within a second, edge.ts).
  edgeRoutesChanged(deps);
  await removeArtifacts(deps, deployments);
  return { success: true, message: 'Site deleted', id: site.id, domain: site.domain ?? null };
}

/**
 * The artifacts of deployments that are gone leave the store, then the contents no remaining artifact uses. A
 * failure is logged, not answered: the site is deleted, and the next deletion collects what was left.
 */
async function removeArtifacts(deps: AppDeps, deploymentIds: readonly string[]): Promise<void> {
  const store = runtimeOf(deps, 'hosting').artifacts;
  try {
    for (const id of deploymentIds) await store.remove(id);
    if (deploymentIds.length > 0) await store.collectGarbage();
  } catch (err) {
    deps.log.warn({ err }, 'could not remove the artifacts of a deleted site');
  }
}
