import { z } from 'zod';
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
  /** The schema of its data, checked at send and before it runs (docs/jobs.md, "What the queue layer adds"). */
  readonly payload: z.ZodType<T>;
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

/** The payload of a job that carries no data (a cron job's): `{}`. */
export const noPayload = z.object({});

/** A module job's options: the queue's (retries, cron, batch size, ...) and the schema of its data. */
export interface ModuleJobOptions<S extends z.ZodType<object>> extends JobOptions {
  /**
   * What the job's data is (`z.object({ connection_id: z.string(), ... })`; `noPayload` for a cron job): `send`
   * throws on data that does not match, and a stored job whose data does not match fails without retries.
   */
  payload: S;
}

/** Defines a job: `name` is `<module>.<verb>`; its data type is that of `options.payload`, its schema. */
export function defineJob<S extends z.ZodType<object>>(
  name: string,
  run: (deps: AppDeps, data: z.output<S>, job: JobInfo) => Promise<void>,
  { payload, ...options }: ModuleJobOptions<S>,
): ModuleJob<z.output<S>> {
  // S is a schema whose output is z.output<S>: what ModuleJob's `payload` states.
  const schema = payload as unknown as z.ZodType<z.output<S>>;
  return { name, options: { retryLimit: DEFAULT_JOB_RETRY_LIMIT, ...options }, payload: schema, run };
}
