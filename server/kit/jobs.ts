import type { JobInfo, JobOptions, JobRef } from '../jobs/queue.js';
import type { AppDeps } from './deps.js';

/**
 * A background job of a module, defined once with its data type: the definition is also the handle to send it
 * (`deps.jobs.send(vpnActivateJob, { connection_id, generation })` is checked against that type). Listed in the
 * module's manifest, which registers it on the queue at start.
 */
export interface ModuleJob<T extends object> extends JobRef<T> {
  readonly name: string;
  readonly options: JobOptions;
  run(deps: AppDeps, data: T, job: JobInfo): Promise<void>;
}

// Handlers are contravariant in their data: the manifests' lists hold jobs of any data type.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyModuleJob = ModuleJob<any>;

/**
 * Attempts after the first of a module job that sets none. A job whose process died is retried like a failed one
 * (docs/operating.md, "Jobs and crash recovery"), so every module job allows retries, and its handler tolerates running again.
 */
export const DEFAULT_JOB_RETRY_LIMIT = 3;

/** Defines a job: `name` is `<module>.<verb>`; `options` are the queue's (retries, cron, batch size, ...). */
export function defineJob<T extends object = Record<string, never>>(
  name: string,
  run: (deps: AppDeps, data: T, job: JobInfo) => Promise<void>,
  options: JobOptions = {},
): ModuleJob<T> {
  return { name, options: { retryLimit: DEFAULT_JOB_RETRY_LIMIT, ...options }, run };
}
