import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import type { Em } from '../../db/orm.js';
import type { AppDeps } from '../../kit/deps.js';
import type { JobInfo } from '../../jobs/queue.js';
import { appendBuildLog, type LogEvent } from './build-logs.js';
import { transition, type FinalDeploymentStatus } from './deployment-state.js';
import type { BuildOutput, BuildSpec, BuildStepResult, HostingDriver } from './hosting.driver.js';
import { openEnvironment } from './site-environment.js';
import { deploymentUrl, toDeploymentDto } from './hosting.dto.js';
import { hostingDeploymentFailed, hostingDeploymentSucceeded } from './hosting.events.js';
import { BUILD_STEP_RETRY_LIMIT, hostingBuildJob, type BuildJobData } from './hosting.jobs.js';
import type { HostingDeployment } from './hosting-deployment.entity.js';
import type { HostingSite } from './hosting-site.entity.js';
import { advanceProcessBuild } from './process-builds.js';

/**
 * The build chain: what the `hosting.build` job does (hosting.jobs.ts). The builds of a site run one at a time, oldest
 * first, as a chain of `hosting.build` jobs, each doing one step: start the oldest queued deployment (the driver's
 * step 0), run the next step of the building one, and so on; the step that ends a build queues the start of the next
 * queued deployment, if any.
 *
 * Every job is queued in the transaction that decided it, under the site's row lock, and carries the site's
 * `build_ticket` as bumped by that transaction: a job whose ticket is no longer the site's does nothing. So there is
 * at most one live chain per site, whatever else is queued (a cancel, a restart or a lost race queues a fresh chain
 * and retires the old one).
 *
 * A step's driver call runs outside any transaction; its output is written in a transaction that locks the site and
 * checks that the ticket and the step are still those it ran for (a cancel in the meantime discards it). Steps are
 * idempotent: a step that runs again after a crash writes its lines once.
 *
 * Restarts: a stop lets the running step finish (the next one stays queued in the database); at start,
 * {@link resumeBuilds} queues a fresh chain for every site with unfinished builds, so a build interrupted by a crash
 * resumes where it was (with a line in its log saying so) instead of staying `building`. A step that keeps failing
 * ends its build `failed` with the reason in the log.
 */

/** Removes the artifacts of deployments that no longer exist, then unused contents; how many of each went. */
export async function collectOrphanArtifacts(deps: AppDeps): Promise<{ removed: number; contents: number }> {
  const { artifacts, repository } = runtimeOf(deps, 'hosting');
  const ids = await artifacts.deploymentIds();
  const em = repository.fork();
  let removed = 0;
  for (let i = 0; i < ids.length; i += 500) {
    const chunk = ids.slice(i, i + 500);
    const existing = await repository.existingDeployments(em, chunk);
    for (const id of chunk) {
      if (existing.has(id)) continue;
      await artifacts.remove(id);
      removed += 1;
    }
  }
  return { removed, contents: removed > 0 ? await artifacts.collectGarbage() : 0 };
}

/**
 * The wait before a queued build starts (and between a site's builds): `PROVISIONING_DELAY_MS` for the simulated
 * builder, whose steps it paces; none for real builds, which take the time they take (docs/hosting.md).
 */
export function buildPaceMs(deps: AppDeps): number {
  return runtimeOf(deps, 'hosting').driver.kind === 'steps' ? deps.config.provisioningDelayMs : 0;
}

/** The time between two steps of a building deployment. */
export function stepDelayMs(paceMs: number, driver: HostingDriver): number {
  return Math.round(paceMs / Math.max(1, (driver.kind === 'steps' ? driver.steps : 2) - 1));
}

/**
 * Retires any queued job of the site's chain and queues the next one, in `tx` (which must hold the site's row lock).
 * The queue wakes its worker after the commit, when the job falls due (docs/jobs.md, "What the queue layer adds").
 */
export async function scheduleBuildStep(
  deps: AppDeps,
  tx: Em,
  site: HostingSite,
  opts: { delayMs: number; paceMs: number },
): Promise<void> {
  site.buildTicket += 1;
  await deps.jobs.send(
    hostingBuildJob,
    { site_id: site.id, ticket: site.buildTicket, pace_ms: opts.paceMs },
    { em: tx, delayMs: opts.delayMs },
  );
}

/** The oldest deployment of a site waiting to build. */
async function oldestQueued(deps: AppDeps, em: Em, siteId: string): Promise<HostingDeployment | null> {
  const [first] = await repositoryOf(deps, 'hosting').deploymentsIn(em, siteId, ['queued']);
  return first ?? null;
}

/**
 * After a build ended (in `tx`, under the site's lock): queues the start of the oldest deployment still waiting, if
 * any, `paceMs` from now.
 */
export async function startNextBuild(
  deps: AppDeps,
  tx: Em,
  site: HostingSite,
  paceMs: number,
): Promise<void> {
  if (await oldestQueued(deps, tx, site.id))
    await scheduleBuildStep(deps, tx, site, { delayMs: paceMs, paceMs });
}

/**
 * Ends a deployment (`success`, `failed` or `canceled`) inside `tx`, which holds the site's row lock: its time is
 * recorded for the usage report, a success becomes the site's live and preview deployment, and the event of the
 * outcome is recorded in the same transaction.
 */
export function completeDeployment(
  tx: Em,
  deps: AppDeps,
  site: HostingSite,
  d: HostingDeployment,
  outcome: FinalDeploymentStatus,
  reason: string | null,
  now: Date,
): void {
  const repository = repositoryOf(deps, 'hosting');
  transition(d, outcome, now, reason);
  if (d.startedAt) {
    repository.addUsageRecord(tx, {
      resourceId: d.id,
      organizationId: site.organization.id,
      kind: 'build',
      siteId: site.id,
      startedAt: d.startedAt,
      endedAt: now,
    });
  }
  if (outcome === 'success') {
    site.liveDeploymentId = d.id;
    site.liveDeploymentAt = now;
    site.previewDeploymentId = d.id;
    site.liveSince ??= now;
    site.updatedAt = now;
  }
  const domain = deps.config.sitesDomain;
  const event =
    outcome === 'success'
      ? hostingDeploymentSucceeded
      : outcome === 'failed'
        ? hostingDeploymentFailed
        : undefined;
  if (event) repository.recordEvent(tx, event, toDeploymentDto(d, site, domain), site.organization.id, now);
}

/**
 * What the builder is told of a deployment. `environment` is the site's variables in clear (site-environment.ts):
 * given explicitly, since a site row read without them (a lock) has none loaded.
 */
export function buildSpecOf(
  deps: AppDeps,
  site: HostingSite,
  d: HostingDeployment,
  environment: Record<string, string>,
): BuildSpec {
  return {
    deploymentId: d.id,
    siteId: site.id,
    gitRepo: d.gitRepo,
    branch: d.branch,
    commit: d.commit,
    framework: d.framework,
    buildCommand: d.buildCommand,
    outputDirectory: d.outputDirectory,
    nodeVersion: d.nodeVersion,
    environmentVariableNames: Object.keys(environment),
    url: deploymentUrl(site.slug, d.id, deps.config.sitesDomain),
  };
}

/** What a committed step leaves to do: hand its lines to followers. */
type AfterCommit = () => void;

export function lockSite(deps: AppDeps, tx: Em, siteId: string): Promise<HostingSite | null> {
  return repositoryOf(deps, 'hosting').lockSite(tx, siteId);
}

/** Writes `output` and the outcome of a step, and queues what follows. Inside `tx`, under the site's lock. */
async function applyStep(
  deps: AppDeps,
  tx: Em,
  site: HostingSite,
  d: HostingDeployment,
  step: number,
  result:
    | { state: 'running'; output: BuildOutput[] }
    | { state: 'succeeded'; output: BuildOutput[] }
    | { state: 'failed'; output: BuildOutput[]; reason: string },
  paceMs: number,
): Promise<AfterCommit> {
  const driver = runtimeOf(deps, 'hosting').driver;
  const now = deps.clock.now();
  if (d.status === 'queued') transition(d, 'building', now);
  if (driver.kind !== 'steps') throw new Error('a stepped build needs a stepped builder');
  const lines = await appendBuildLog(deps, tx, d, result.output, now);
  d.updatedAt = now;
  const event: LogEvent = { deploymentId: d.id, lines };
  if (result.state === 'running') {
    d.buildStep = step + 1;
    await scheduleBuildStep(deps, tx, site, { delayMs: stepDelayMs(paceMs, driver), paceMs });
  } else {
    const outcome = result.state === 'succeeded' ? 'success' : 'failed';
    completeDeployment(tx, deps, site, d, outcome, result.state === 'failed' ? result.reason : null, now);
    event.status = outcome;
    await startNextBuild(deps, tx, site, paceMs);
  }
  const hub = runtimeOf(deps, 'hosting').logHub;
  await hub.announce(tx, event);
  return () => hub.publish(event);
}

/** One job of a site's chain: the next step of its building deployment, or the start of the oldest queued one. */
export async function advanceBuilds(deps: AppDeps, data: BuildJobData, job?: JobInfo): Promise<void> {
  const repository = repositoryOf(deps, 'hosting');
  const em = repository.fork();
  const site = await repository.siteForBuild(em, data.site_id);
  if (!site || site.buildTicket !== data.ticket) return;
  const [building] = await repository.deploymentsIn(em, site.id, ['building']);
  const current = building ?? (await oldestQueued(deps, em, site.id));
  if (!current) return;
  const step = building ? current.buildStep : 0;
  const driver = runtimeOf(deps, 'hosting').driver;
  if (driver.kind === 'process') {
    await advanceProcessBuild(deps, data, site, current, driver);
    return;
  }

  let result: BuildStepResult;
  try {
    result = await driver.runStep(
      step,
      buildSpecOf(deps, site, current, openEnvironment(deps, site.environmentVariables)),
    );
  } catch (err) {
    if ((job?.retryCount ?? BUILD_STEP_RETRY_LIMIT) >= BUILD_STEP_RETRY_LIMIT) {
      deps.log.error({ err, deployment: current.id, step }, 'build step failed for good');
      result = {
        state: 'failed',
        output: [{ stream: 'stderr', message: 'Build failed: the builder stopped responding' }],
        reason: 'The builder stopped responding',
      };
    } else {
      throw err;
    }
  }

  const after = await repository.transaction(
    repository.fork(),
    async (tx): Promise<AfterCommit | undefined> => {
      const s = await lockSite(deps, tx, data.site_id);
      if (!s || s.buildTicket !== data.ticket) return undefined;
      const d = await repository.findDeployment(tx, s.id, current.id);
      const unchanged =
        d &&
        (building ? d.status === 'building' && d.buildStep === step : d.status === 'queued') &&
        // Starting: nothing else may have started meanwhile.
        (building || (await repository.countDeployments(tx, s.id, ['building'])) === 0);
      if (!unchanged) {
        // The deployment was canceled (or another started) while the step ran: look again at once.
        await scheduleBuildStep(deps, tx, s, { delayMs: 0, paceMs: data.pace_ms });
        return undefined;
      }
      return applyStep(deps, tx, s, d, step, result, data.pace_ms);
    },
  );
  after?.();
}

/**
 * At start: a fresh chain for every site with unfinished builds. A build that was `building` goes on from the step
 * it had reached, and says so in its log.
 */
export async function resumeBuilds(deps: AppDeps): Promise<number> {
  const { repository, driver } = runtimeOf(deps, 'hosting');
  const rows = await repository.sitesWithUnfinishedBuilds();
  const paceMs = buildPaceMs(deps);
  for (const siteId of rows) {
    const after = await repository.transaction(repository.fork(), async (tx) => {
      const site = await lockSite(deps, tx, siteId);
      if (!site) return undefined;
      const [building] = await repository.deploymentsIn(tx, site.id, ['building']);
      let event: LogEvent | undefined;
      if (building && driver.kind === 'steps') {
        const now = deps.clock.now();
        const lines = await appendBuildLog(
          deps,
          tx,
          building,
          [{ stream: 'stdout', message: 'The build service restarted; resuming the build where it stopped' }],
          now,
        );
        building.updatedAt = now;
        event = { deploymentId: building.id, lines };
        await runtimeOf(deps, 'hosting').logHub.announce(tx, event);
      }
      await scheduleBuildStep(deps, tx, site, {
        delayMs: building ? stepDelayMs(paceMs, driver) : paceMs,
        paceMs,
      });
      return event;
    });
    if (after) runtimeOf(deps, 'hosting').logHub.publish(after);
  }
  if (rows.length > 0) deps.log.info({ sites: rows.length }, 'resumed unfinished builds');
  return rows.length;
}
