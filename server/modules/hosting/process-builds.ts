import { runtimeOf } from '../../kit/runtime.js';
import type { Em } from '../../db/orm.js';
import { edgeRoutesChanged } from './edge.js';
import type { AppDeps } from '../../kit/deps.js';
import { appendBuildLog, type LogEvent } from './build-logs.js';
import { transition } from './deployment-state.js';
import type { BuildOutput, ProcessBuildResult, ProcessHostingDriver } from './hosting.driver.js';
import type { HostingDeployment } from './hosting-deployment.entity.js';
import { openEnvironment } from './site-environment.js';
import type { HostingSite } from './hosting-site.entity.js';
import {
  buildSpecOf,
  completeDeployment,
  lockSite,
  scheduleBuildStep,
  startNextBuild,
} from './builds.service.js';
import type { BuildJobData } from './hosting.jobs.js';

/**
 * Real builds in the site's job chain (builds.service.ts). A build is one long process, so the chain's job does not
 * wait for it (the queue runs a queue's jobs one after another): it marks the deployment `building` and starts the
 * build in the background of this process, at most `BUILD_CONCURRENCY` at once. The build writes its lines as they
 * come (a few times a second) and, at least every {@link HEARTBEAT_MS}, touches the deployment's `updated_at`: the
 * mark that it is alive. Each write checks the deployment is still `building`; a cancel or the site's deletion
 * stops the build (its process tree is killed) at the next write, or at once when it happens in this process.
 *
 * Crashes: a chain job that finds a `building` deployment not running in its own process waits while the heartbeat
 * is fresh (another process runs it), and past {@link STALE_MS} without one fails it, saying why. A stop of the
 * process ends its builds `failed` the same way (hosting.module.ts). So no build stays `building`.
 */

const HEARTBEAT_MS = 5_000;
export const STALE_MS = 30_000;
/** Output is written at most this often (lines arriving meanwhile go in one transaction). */
const FLUSH_MS = 200;
/** A capacity-full process looks again this soon. */
const BUSY_RETRY_MS = 1_000;

const INTERRUPTED = 'The build was interrupted: the build service stopped during the build; deploy again';
const LOG_FAILED = 'The build log could not be written; the build was stopped';

export interface RunningBuild {
  controller: AbortController;
  done: Promise<void>;
}

/** The real builds running in this process, by deployment (`runtimeOf(deps, 'hosting').builds`). */
export type RunningBuilds = Map<string, RunningBuild>;

function running(deps: AppDeps): RunningBuilds {
  return runtimeOf(deps, 'hosting').builds;
}

/** Queues the chain's next look in `delayMs`, if the chain is still the site's. */
async function lookAgain(deps: AppDeps, data: BuildJobData, delayMs: number): Promise<void> {
  const { repository } = runtimeOf(deps, 'hosting');
  await repository.transaction(repository.fork(), async (tx) => {
    const s = await lockSite(deps, tx, data.site_id);
    if (s && s.buildTicket === data.ticket)
      await scheduleBuildStep(deps, tx, s, { delayMs, paceMs: data.pace_ms });
  });
}

/** Ends a building deployment `failed` with `reason` (and its lines), if it is still building. */
async function failBuilding(
  deps: AppDeps,
  tx: Em,
  site: HostingSite,
  d: HostingDeployment,
  reason: string,
  paceMs: number,
): Promise<() => void> {
  const now = deps.clock.now();
  const lines = await appendBuildLog(deps, tx, d, [{ stream: 'stderr', message: reason }], now);
  completeDeployment(tx, deps, site, d, 'failed', reason, now);
  const event: LogEvent = { deploymentId: d.id, lines, status: 'failed' };
  await runtimeOf(deps, 'hosting').logHub.announce(tx, event);
  await startNextBuild(deps, tx, site, paceMs);
  return () => runtimeOf(deps, 'hosting').logHub.publish(event);
}

/** The chain's job, for a real builder: start the oldest queued deployment, or watch over the building one. */
export async function advanceProcessBuild(
  deps: AppDeps,
  data: BuildJobData,
  site: HostingSite,
  current: HostingDeployment,
  driver: ProcessHostingDriver,
): Promise<void> {
  const local = running(deps);
  const { repository } = runtimeOf(deps, 'hosting');
  if (current.status === 'building') {
    if (local.has(current.id)) return;
    const age = deps.clock.now().getTime() - current.updatedAt.getTime();
    if (age < STALE_MS) {
      await lookAgain(deps, data, STALE_MS - age + 100);
      return;
    }
    const after = await repository.transaction(repository.fork(), async (tx) => {
      const s = await lockSite(deps, tx, data.site_id);
      if (!s || s.buildTicket !== data.ticket) return undefined;
      const d = await repository.findDeployment(tx, s.id, current.id);
      if (d?.status !== 'building' || d.updatedAt.getTime() !== current.updatedAt.getTime()) {
        await scheduleBuildStep(deps, tx, s, { delayMs: 0, paceMs: data.pace_ms });
        return undefined;
      }
      return failBuilding(deps, tx, s, d, INTERRUPTED, data.pace_ms);
    });
    after?.();
    return;
  }
  if (local.size >= driver.concurrency) {
    await lookAgain(deps, data, BUSY_RETRY_MS);
    return;
  }
  const started = await repository.transaction(repository.fork(), async (tx) => {
    // With its variables: the build gets them, and their names (buildSpecOf).
    const s = await repository.lockSite(tx, data.site_id, { withEnvironment: true });
    if (!s || s.buildTicket !== data.ticket) return undefined;
    const d = await repository.findDeployment(tx, s.id, current.id);
    const busy = await repository.countDeployments(tx, s.id, ['building']);
    if (d?.status !== 'queued' || busy > 0) return undefined;
    // The builders are shared between organizations (docs/hosting.md, "Sharing the builders"): at most
    // BUILD_CONCURRENCY_PER_ORGANIZATION builds of one organization at once, and one that already has a build
    // running leaves a free builder to an organization that has none.
    const share = await repository.buildShare(tx, s.organization.id);
    if (
      share.building >= deps.config.hosting.buildConcurrencyPerOrganization ||
      (share.building > 0 && share.othersWaiting)
    ) {
      return 'wait' as const;
    }
    const now = deps.clock.now();
    transition(d, 'building', now);
    d.builder = 'local';
    // Stored encrypted (site-environment.ts): the build gets them in clear, and its log masks their values.
    const environment = openEnvironment(deps, s.environmentVariables);
    return { spec: buildSpecOf(deps, s, d, environment), environment, pinned: d.commitPinned };
  });
  if (started === 'wait') {
    await lookAgain(deps, data, BUSY_RETRY_MS);
    return;
  }
  if (!started) {
    await lookAgain(deps, data, 0);
    return;
  }
  const controller = new AbortController();
  const writer = logWriter(deps, data.site_id, current.id, controller);
  const done = runInBackground(deps, data, current.id, controller, writer, () =>
    driver.build(
      { ...started.spec, environment: started.environment, commitPinned: started.pinned },
      {
        signal: controller.signal,
        output: (lines) => writer.push(lines),
        commit: (sha) => writer.setCommit(sha),
      },
    ),
  ).finally(() => local.delete(current.id));
  local.set(current.id, { controller, done });
}

interface LogWriter {
  push(lines: BuildOutput[]): void;
  setCommit(sha: string): void;
  /**
   * Writes what is pending; false when the deployment is no longer building or a write failed. Never rejects: a
   * failed write stops the build (its reason in {@link LogWriter.failure}), which then ends `failed`.
   */
  flush(): Promise<boolean>;
  /** Why writing the log failed, once it has. */
  readonly failure: string | undefined;
  stop(): void;
}

function logWriter(
  deps: AppDeps,
  siteId: string,
  deploymentId: string,
  controller: AbortController,
): LogWriter {
  let pending: BuildOutput[] = [];
  let commit: string | undefined;
  let chain: Promise<boolean> = Promise.resolve(true);
  let lastWrite = Date.now();
  let failure: string | undefined;
  // The log keeps at most BUILD_LOG_MAX_LINES lines and the cut line (appendBuildLog): more is never held here.
  let room = deps.config.hosting.buildLogMaxLines + 1;
  const write = async (): Promise<boolean> => {
    const lines = pending;
    pending = [];
    const sha = commit;
    commit = undefined;
    lastWrite = Date.now();
    const { repository } = runtimeOf(deps, 'hosting');
    const result = await repository
      .transaction(repository.fork(), async (tx) => {
        // The site's lock, as every writer of a deployment's log takes it (the numbering of lines depends on it).
        const s = await lockSite(deps, tx, siteId);
        const d = s && (await repository.findDeployment(tx, s.id, deploymentId));
        if (!d || d.status !== 'building') return undefined;
        const now = deps.clock.now();
        const written = await appendBuildLog(deps, tx, d, lines, now);
        d.updatedAt = now;
        if (sha) d.commit = sha;
        const event: LogEvent = { deploymentId: d.id, lines: written };
        if (written.length > 0) await runtimeOf(deps, 'hosting').logHub.announce(tx, event);
        return event;
      })
      .catch((err: unknown) => {
        // Whatever the output was, it must not end the process nor leave the deployment building: the build stops
        // and ends `failed` (runInBackground).
        deps.log.error({ err, deployment: deploymentId }, 'could not write a build log');
        failure = LOG_FAILED;
        return 'failed' as const;
      });
    if (result === 'failed') {
      controller.abort('log-failed');
      return false;
    }
    if (!result) {
      controller.abort('gone');
      return false;
    }
    if (result.lines.length > 0) runtimeOf(deps, 'hosting').logHub.publish(result);
    return true;
  };
  const timer = setInterval(() => {
    if (pending.length > 0 || commit || Date.now() - lastWrite >= HEARTBEAT_MS) void w.flush();
  }, FLUSH_MS);
  timer.unref();
  // A cancel in this process stops the build at once (another process's arrives at the next write).
  const unsubscribe = runtimeOf(deps, 'hosting').logHub.subscribe(deploymentId, (e) => {
    if (e !== 'closing' && e.status && e.status !== 'building') controller.abort('gone');
  });
  const w: LogWriter = {
    push(lines) {
      if (room <= 0) return;
      const kept = lines.length > room ? lines.slice(0, room) : lines;
      room -= kept.length;
      for (const line of kept) pending.push(line);
    },
    setCommit(sha) {
      commit = sha;
    },
    get failure() {
      return failure;
    },
    flush() {
      chain = chain
        .then(() => (controller.signal.aborted ? false : write()))
        .catch((err: unknown) => {
          deps.log.error({ err, deployment: deploymentId }, 'could not write a build log');
          failure ??= LOG_FAILED;
          controller.abort('log-failed');
          return false;
        });
      return chain;
    },
    stop() {
      clearInterval(timer);
      unsubscribe();
    },
  };
  return w;
}

async function runInBackground(
  deps: AppDeps,
  data: BuildJobData,
  deploymentId: string,
  controller: AbortController,
  writer: LogWriter,
  build: () => Promise<ProcessBuildResult>,
): Promise<void> {
  let result: ProcessBuildResult;
  try {
    result = await build();
  } catch (err) {
    deps.log.error({ err, deployment: deploymentId }, 'build failed unexpectedly');
    result = { state: 'failed', reason: 'The builder failed unexpectedly' };
  }
  try {
    await writer.flush();
    writer.stop();
    const shutdown = controller.signal.reason === 'shutdown';
    const logFailure = writer.failure;
    const { repository } = runtimeOf(deps, 'hosting');
    const after = await repository.transaction(repository.fork(), async (tx) => {
      const s = await lockSite(deps, tx, data.site_id);
      const d = s && (await repository.findDeployment(tx, s.id, deploymentId));
      if (!s || d?.status !== 'building') return undefined;
      if (shutdown) return failBuilding(deps, tx, s, d, INTERRUPTED, data.pace_ms);
      if (logFailure) return failBuilding(deps, tx, s, d, logFailure, data.pace_ms);
      const now = deps.clock.now();
      completeDeployment(
        tx,
        deps,
        s,
        d,
        result.state === 'succeeded' ? 'success' : 'failed',
        result.state === 'failed' ? result.reason : null,
        now,
      );
      const event: LogEvent = { deploymentId: d.id, lines: [], status: d.status };
      await runtimeOf(deps, 'hosting').logHub.announce(tx, event);
      await startNextBuild(deps, tx, s, data.pace_ms);
      return () => {
        runtimeOf(deps, 'hosting').logHub.publish(event);
        edgeRoutesChanged(deps);
      };
    });
    if (!after && result.state === 'succeeded') {
      // Canceled or deleted meanwhile: its artifact is nobody's.
      await runtimeOf(deps, 'hosting')
        .artifacts.remove(deploymentId)
        .catch(() => undefined);
    }
    after?.();
  } catch (err) {
    writer.stop();
    deps.log.error({ err, deployment: deploymentId }, 'could not record the end of a build');
    // The site's chain looks again once the build's heartbeat is stale, and ends it `failed` then (never `building`
    // for good); if even that cannot be queued now, the next start of the API does it (resumeBuilds).
    await lookAgain(deps, data, STALE_MS + 1_000).catch((e: unknown) =>
      deps.log.error({ err: e, deployment: deploymentId }, 'could not watch over an unfinished build'),
    );
  }
}

/** At stop: every build of this process ends `failed` (its processes are killed), saying why. */
export async function stopProcessBuilds(deps: AppDeps): Promise<void> {
  const local = running(deps);
  for (const r of local.values()) r.controller.abort('shutdown');
  await Promise.race([
    Promise.all([...local.values()].map((r) => r.done)),
    new Promise((r) => setTimeout(r, 10_000).unref()),
  ]);
}
