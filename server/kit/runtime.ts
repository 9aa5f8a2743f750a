import type { AppDeps, ModuleRuntimes, ModuleWithRepository } from './deps.js';
import type { RunningWorker } from './module.js';

/**
 * A module's own runtime, what its manifest's `create` built at start (docs/adding-a-module.md, "Checklist"):
 * `runtimeOf(ctx.deps, 'vpn').peers`. A module reaches only its own (tests/kit/layers.test.ts).
 */
export function runtimeOf<N extends keyof ModuleRuntimes>(deps: AppDeps, name: N): ModuleRuntimes[N] {
  return deps.modules[name];
}

/** What a module's repository is, by module name. */
export type RepositoryOf<N extends ModuleWithRepository> = ModuleRuntimes[N] extends { repository: infer R }
  ? R
  : never;

/**
 * A module's repository, built once per process by its `create`: every read and write of its tables, with the unit
 * of work passed on each call (`repositoryOf(ctx.deps, 'vpn').listConnections(ctx.em, filter, page)`).
 */
export function repositoryOf<N extends ModuleWithRepository>(deps: AppDeps, name: N): RepositoryOf<N> {
  return (deps.modules[name] as { repository: RepositoryOf<N> }).repository;
}

/** Registers every module's jobs on the queue (before it starts); each handler runs with the process's deps. */
export function defineModuleJobs(deps: AppDeps): void {
  for (const job of deps.registry.jobs) {
    deps.jobs.define({
      name: job.name,
      ...job.options,
      payload: job.payload,
      handler: (data, info) => job.run(deps, data, info),
    });
  }
}

/** Pieces of modules' runtimes put in place of what their `create` built (tests: a driver that fails on purpose). */
export type ModuleOverrides = { [K in keyof AppDeps['modules']]?: Partial<AppDeps['modules'][K]> };

/**
 * Builds every module's runtime (manifest `create`), in manifest order, into `deps.modules`, then lays `overrides`
 * over it. Runs once per process at start, before jobs and workers.
 */
export async function createModuleRuntimes(deps: AppDeps, overrides: ModuleOverrides = {}): Promise<void> {
  const built = deps.modules as unknown as Record<string, object>;
  const replaced = overrides as Record<string, object | undefined>;
  for (const m of deps.registry.modules) {
    if (!m.create) continue;
    const runtime = (await m.create(deps, deps.config)) as object;
    built[m.name] = Object.assign(runtime, replaced[m.name]);
  }
}

/** Releases every module's runtime (manifest `stop`), in reverse manifest order; each is asked even if one fails. */
export async function stopModuleRuntimes(deps: AppDeps): Promise<void> {
  const built = deps.modules as unknown as Record<string, unknown>;
  const failures: unknown[] = [];
  for (const m of [...deps.registry.modules].reverse()) {
    const runtime = built[m.name];
    if (!m.stop || runtime === undefined) continue;
    await m.stop(runtime).catch((err: unknown) => failures.push(err));
  }
  if (failures.length > 0) throw failures[0];
}

/** What a process started and must stop: its modules' running workers, and its stop once asked. */
export class ProcessRuntime {
  private workers: RunningWorker[] = [];
  private stopping: Promise<void> | undefined;

  /** Starts every module's workers, in manifest order (after the job queue). */
  async startWorkers(deps: AppDeps): Promise<void> {
    for (const worker of deps.registry.workers) this.workers.push(await worker.start(deps));
  }

  /** Stops the workers in reverse start order; every one is asked to stop even if another fails. */
  async stopWorkers(): Promise<void> {
    const started = this.workers;
    this.workers = [];
    const failures: unknown[] = [];
    for (const worker of [...started].reverse()) {
      await worker.stop().catch((err: unknown) => failures.push(err));
    }
    if (failures.length > 0) throw failures[0];
  }

  /** Runs `stop` the first time; every later call waits for that same stop. */
  stopOnce(stop: () => Promise<void>): Promise<void> {
    this.stopping ??= stop();
    return this.stopping;
  }
}
