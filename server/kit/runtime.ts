import type { AppDeps } from './deps.js';
import type { RunningWorker } from './module.js';

/** Registers every module's jobs on the queue (before it starts); each handler runs with the process's deps. */
export function defineModuleJobs(deps: AppDeps): void {
  for (const job of deps.registry.jobs) {
    deps.jobs.define({ name: job.name, ...job.options, handler: (data, info) => job.run(deps, data, info) });
  }
}

const running = new WeakMap<AppDeps, Map<string, RunningWorker>>();

/** Starts every module's workers, in manifest order (after the job queue). */
export async function startModuleWorkers(deps: AppDeps): Promise<void> {
  const started = new Map<string, RunningWorker>();
  running.set(deps, started);
  for (const worker of deps.registry.workers) started.set(worker.name, await worker.start(deps));
}

/** A running worker of this process, by name (tests use it to relay or deliver now). */
export function workerOf<T extends RunningWorker>(deps: AppDeps, name: string): T | undefined {
  return running.get(deps)?.get(name) as T | undefined;
}

/** Stops the workers in reverse start order; every one is asked to stop even if another fails. */
export async function stopModuleWorkers(deps: AppDeps): Promise<void> {
  const started = running.get(deps);
  running.delete(deps);
  if (!started) return;
  const failures: unknown[] = [];
  for (const worker of [...started.values()].reverse()) {
    await worker.stop().catch((err: unknown) => failures.push(err));
  }
  if (failures.length > 0) throw failures[0];
}
