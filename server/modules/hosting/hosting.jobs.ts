import { z } from 'zod';
import { defineJob, noPayload } from '../../kit/jobs.js';
// The service imports this file's job refs: this file uses its functions only when a job runs.
import { advanceBuilds, collectOrphanArtifacts } from './builds.service.js';

const buildJobPayload = z.object({
  site_id: z.string().min(1),
  /** The site's `build_ticket` when the job was queued. */
  ticket: z.number().int(),
  /** The provisioning delay the chain keeps to (that of the process that queued the first job). */
  pace_ms: z.number().int().nonnegative(),
});
export type BuildJobData = z.output<typeof buildJobPayload>;

/** Attempts of a build step after its first failure; the last one ends the build `failed` (builds.service.ts). */
export const BUILD_STEP_RETRY_LIMIT = 3;

/**
 * One step of a site's build chain (builds.service.ts): the next step of its building deployment, or the start of
 * the oldest queued one.
 */
export const hostingBuildJob = defineJob(
  'hosting.build',
  (deps, data, job) => advanceBuilds(deps, data, job),
  {
    retryLimit: BUILD_STEP_RETRY_LIMIT,
    retryDelaySeconds: 1,
    batchSize: 10,
    expireInSeconds: 300,
    payload: buildJobPayload,
  },
);

/**
 * Artifacts whose deployment is gone (docs/hosting.md, "Artifacts"): a deleted site removes its own at once, but an
 * organization's deletion removes its rows only, and a process may stop between a site's deletion and its
 * artifacts'. Every fifteen minutes, the manifests of deployments that no longer exist leave the store, then the
 * contents no remaining artifact uses.
 */
export const hostingCollectArtifactsJob = defineJob(
  'hosting.collect-artifacts',
  async (deps) => {
    const { removed, contents } = await collectOrphanArtifacts(deps);
    if (removed > 0)
      deps.log.info({ artifacts: removed, contents }, 'removed the artifacts of deleted deployments');
  },
  { cron: '*/15 * * * *', payload: noPayload },
);
