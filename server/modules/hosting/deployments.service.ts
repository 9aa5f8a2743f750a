import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import { randomBytes } from 'node:crypto';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import type { Em } from '../../db/orm.js';
import type { ActorContext } from '../../kit/deps.js';
import { conflict, notFound, validation } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import { appendBuildLog, followLogs, type LogEvent } from './build-logs.js';
import { assertCanGoLive, assertCanTransition, UNFINISHED_STATUSES } from './deployment-state.js';
import type { HostingRepository } from './hosting.repository.js';
import { shortId, toDeploymentDto, toSiteDetailDto } from './hosting.dto.js';
import { edgeRoutesChanged } from './edge.js';
import { openEnvironment } from './site-environment.js';
import { buildPaceMs, completeDeployment, scheduleBuildStep, startNextBuild } from './builds.service.js';
import type { HostingDeployment } from './hosting-deployment.entity.js';
import type { HostingSite } from './hosting-site.entity.js';
import type {
  TCancelDeploymentInput,
  TDeployInput,
  TDeploymentIdInput,
  TDeploymentOutput,
  TListDeploymentsInput,
  TListDeploymentsOutput,
  TLogsInput,
  TLogsOutput,
  TRollbackInput,
  TSiteOutput,
} from './hosting.schema.js';
import { findSiteOrThrow } from './sites.service.js';

const NO_COMMIT = '0'.repeat(40);

const deploymentNotFound = () => notFound('Deployment');

/** A deployment of `site`; any other id (another site's included) is not found. */
async function findDeploymentOrThrow(
  repository: HostingRepository,
  em: Em,
  site: HostingSite,
  id: string,
): Promise<HostingDeployment> {
  if (!isId('dep', id)) throw deploymentNotFound();
  const d = await repository.findDeployment(em, site.id, id);
  if (!d) throw deploymentNotFound();
  return d;
}

/**
 * A new deployment id whose preview address (`<slug>-<short id>`) is no site's own address, so no two sites'
 * addresses ever meet.
 */
async function newDeploymentId(repository: HostingRepository, tx: Em, slug: string): Promise<string> {
  for (;;) {
    const id = newId('dep');
    const label = `${slug}-${shortId(id)}`;
    if (!(await repository.slugsInUse(tx, [label])).has(label)) return id;
  }
}

/**
 * Queues a build of the site (202): `queued` now; the site's build chain starts it once the builds before it ended
 * (builds.service.ts). The build settings are those of the site now.
 */
/** Deployments of a site that may wait `queued` (docs/sites.md, "Deployments (simulated builds)"); one more: 409. */
export const MAX_QUEUED_DEPLOYMENTS = 10;

export async function deploy(ctx: ActorContext, input: TDeployInput): Promise<TDeploymentOutput> {
  const { deps } = ctx;
  const paceMs = buildPaceMs(deps);
  const builder = deps.config.hosting.builder;
  const repository = repositoryOf(deps, 'hosting');
  const { site, deployment } = await repository.transaction(ctx.em, async (tx) => {
    const site = await findSiteOrThrow({ em: tx, actor: ctx.actor, deps }, input.id, { lock: true });
    const now = deps.clock.now();
    const busy = await repository.countDeployments(tx, site.id, UNFINISHED_STATUSES);
    // Under the site's lock, so two deploys at once cannot both take the last place.
    const queued = await repository.countDeployments(tx, site.id, ['queued']);
    if (queued >= MAX_QUEUED_DEPLOYMENTS) {
      throw conflict(
        `The site already has ${MAX_QUEUED_DEPLOYMENTS} deployments waiting to build; cancel one or wait for the queue to move`,
        [{ resource: 'queued_deployments', limit: MAX_QUEUED_DEPLOYMENTS, current: queued }],
      );
    }
    const deployment = repository.createDeployment(tx, {
      id: await newDeploymentId(repository, tx, site.slug),
      now,
      site,
      branch: input.branch ?? site.branch,
      // A real build records the head of the branch once fetched (all zeros, git's "no commit", until then).
      commit: input.commit ?? (builder === 'local' ? NO_COMMIT : randomBytes(20).toString('hex')),
      commitPinned: input.commit !== undefined,
      builder,
      message: input.message || null,
    });
    // An idle site starts a chain; otherwise the running chain reaches this deployment in turn.
    if (busy === 0) await scheduleBuildStep(deps, tx, site, { delayMs: paceMs, paceMs });
    return { site, deployment };
  });
  return { success: true, deployment: toDeploymentDto(deployment, site, deps.config.sitesDomain) };
}

/**
 * Reads the site and its deployments in one snapshot, so that `live` (from the site) and the statuses (from the
 * deployments) agree even while a build ends.
 */
function inOneSnapshot<T>(ctx: ActorContext, read: (em: Em) => Promise<T>): Promise<T> {
  return repositoryOf(ctx.deps, 'hosting').snapshot(ctx.em, read);
}

export async function listDeployments(
  ctx: ActorContext,
  input: TListDeploymentsInput,
): Promise<TListDeploymentsOutput> {
  const request = pageRequest(input);
  const { site, page } = await inOneSnapshot(ctx, async (em) => {
    const site = await findSiteOrThrow({ em, actor: ctx.actor, deps: ctx.deps }, input.id);
    const page = await repositoryOf(ctx.deps, 'hosting').listDeployments(em, site.id, input.status, request);
    return { site, page };
  });
  const domain = ctx.deps.config.sitesDomain;
  return {
    success: true,
    deployments: page.items.map((d) => toDeploymentDto(d, site, domain)),
    ...pageFields(request, page),
  };
}

export async function getDeployment(
  ctx: ActorContext,
  input: TDeploymentIdInput,
): Promise<TDeploymentOutput> {
  const { site, d } = await inOneSnapshot(ctx, async (em) => {
    const site = await findSiteOrThrow({ em, actor: ctx.actor, deps: ctx.deps }, input.id);
    return {
      site,
      d: await findDeploymentOrThrow(repositoryOf(ctx.deps, 'hosting'), em, site, input.deployment_id),
    };
  });
  return { success: true, deployment: toDeploymentDto(d, site, ctx.deps.config.sitesDomain) };
}

/** `Last-Event-ID` as a line number, when the client sent one. */
function resumeAfter(lastEventId: string | undefined): number | undefined {
  if (lastEventId === undefined || lastEventId.trim() === '') return undefined;
  if (!/^\d{1,10}$/.test(lastEventId.trim())) {
    throw validation('Last-Event-ID', 'Must be the `seq` of a log line');
  }
  return Number(lastEventId.trim());
}

/**
 * A page of a deployment's log after `after`; or, when the caller asked for an event stream, every line after
 * `Last-Event-ID` (or `after`) as it is written, then `end` with the final status (build-logs.ts).
 */
export async function getLogs(ctx: ActorContext, input: TLogsInput): Promise<TLogsOutput> {
  const { deps } = ctx;
  const repository = repositoryOf(deps, 'hosting');
  const site = await findSiteOrThrow(ctx, input.id);
  const d = await findDeploymentOrThrow(repository, ctx.em, site, input.deployment_id);
  const status = d.status;
  if (ctx.eventStream) {
    const after = resumeAfter(ctx.eventStream.lastEventId) ?? input.after;
    const statusOf = () => repository.deploymentStatus(d.id);
    ctx.eventStream.open = (sink) => followLogs(deps, d.id, after, statusOf, sink);
    return { success: true, logs: [], has_more: false, status };
  }
  // Read after the status: a final status means every line is already stored.
  const lines = await repository.readLogLines(ctx.em, d.id, input.after, input.limit + 1);
  return {
    success: true,
    logs: lines.slice(0, input.limit),
    has_more: lines.length > input.limit,
    status,
  };
}

/**
 * `queued` or `building` → `canceled` (anything else: 409). A canceled build writes nothing more and never becomes
 * live; the next queued deployment of the site starts after the provisioning delay (simulated builds; real ones at once).
 */
export async function cancelDeployment(
  ctx: ActorContext,
  input: TCancelDeploymentInput,
): Promise<TDeploymentOutput> {
  const { deps } = ctx;
  const paceMs = buildPaceMs(deps);
  const repository = repositoryOf(deps, 'hosting');
  const { site, deployment, event } = await repository.transaction(ctx.em, async (tx) => {
    const site = await findSiteOrThrow({ em: tx, actor: ctx.actor, deps }, input.id, { lock: true });
    const d = await findDeploymentOrThrow(repository, tx, site, input.deployment_id);
    const wasBuilding = d.status === 'building';
    const now = deps.clock.now();
    // Refused (409) unless queued or building, before anything is written (deployment-state.ts).
    assertCanTransition(d, 'canceled');
    const lines = await appendBuildLog(
      deps,
      tx,
      d,
      [
        {
          stream: 'stdout',
          message: wasBuilding ? 'Build canceled' : 'Deployment canceled before its build started',
        },
      ],
      now,
    );
    completeDeployment(tx, deps, site, d, 'canceled', 'Canceled by request', now);
    const event: LogEvent = { deploymentId: d.id, lines, status: 'canceled' };
    await runtimeOf(deps, 'hosting').logHub.announce(tx, event);
    // The step of the canceled build that is queued no longer applies; the next deployment starts in its own time.
    if (wasBuilding) await startNextBuild(deps, tx, site, paceMs);
    return { site, deployment: d, event };
  });
  runtimeOf(deps, 'hosting').logHub.publish(event);
  return { success: true, deployment: toDeploymentDto(deployment, site, deps.config.sitesDomain) };
}

/** An earlier `success` deployment of the site becomes live again, without a build (anything else: 409). */
export async function rollback(ctx: ActorContext, input: TRollbackInput): Promise<TSiteOutput> {
  const { deps } = ctx;
  const repository = repositoryOf(deps, 'hosting');
  const site = await repository.transaction(ctx.em, async (tx) => {
    const site = await findSiteOrThrow({ em: tx, actor: ctx.actor, deps }, input.id, {
      lock: true,
      withEnvironment: true,
    });
    const d = await findDeploymentOrThrow(repository, tx, site, input.deployment_id);
    assertCanGoLive(d);
    if (site.liveDeploymentId === d.id) throw conflict('The deployment is already live');
    const now = deps.clock.now();
    site.liveDeploymentId = d.id;
    site.liveDeploymentAt = d.completedAt ?? now;
    site.updatedAt = now;
    return site;
  });
  // The edge serves the chosen deployment at once (edge.ts).
  edgeRoutesChanged(deps);
  return {
    success: true,
    site: toSiteDetailDto(
      site,
      deps.config.sitesDomain,
      deps.clock.now(),
      openEnvironment(deps, site.environmentVariables),
    ),
  };
}
