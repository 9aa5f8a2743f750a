import { repositoryOf } from '../../kit/runtime.js';
import { USAGE_FLUSH_INTERVAL_MS } from '../../limits/api-usage.js';
import type { AppDeps } from '../../kit/deps.js';
import { z } from 'zod';
import { defineJob } from '../../kit/jobs.js';
import type { RunningWorker } from '../../kit/module.js';
import {
  organizationBusy,
  organizationRemovalSteps,
  removeOrganizationBatch,
} from '../../kit/organization-hooks.js';

/** By when every row of a deleted organization is gone (`deletion_scheduled`), the contract's bound. */
export const ORGANIZATION_DELETION_DEADLINE_MS = 24 * 3_600_000;
/**
 * How long removal waits, at most, for the modules' unfinished work (the webhooks' first attempt at the events the
 * deletion caused): after that the rows go whatever is pending.
 */
export const ORGANIZATION_SETTLE_MAX_MS = 10 * 60_000;
/** Removal never starts sooner: API call counters counted before the deletion are written by then (api-usage.ts). */
const SETTLE_MIN_MS = USAGE_FLUSH_INTERVAL_MS + 1_000;
const SETTLE_POLL_MS = 500;

/**
 * Batch size and an observer of each batch. The size bounds what one statement deletes (and so how long it holds
 * its locks); tests make it small, and observe batches to stop a process in the middle.
 */
export const organizationPurgeTuning: {
  batchSize: number;
  afterBatch?: (step: { table: string }, removed: number) => void;
} = { batchSize: 500 };

const purgeJobPayload = z.object({
  organization_id: z.string().min(1),
  /** When the job first ran (epoch ms), for the settle wait; set by the job itself. */
  settle_since: z.number().int().optional(),
});
export type PurgeJobData = z.output<typeof purgeJobPayload>;

/**
 * Removes one deleted organization's rows: first waits (re-queuing itself) until the modules have nothing left to
 * finish for it, then runs every module's removal steps (manifest `organizationRows`) in batches of
 * `organizationPurgeTuning.batchSize`, each its own short statement, twice (the second pass takes anything a job
 * still running wrote meanwhile), and removes the organization's row last. Idempotent: a run cut short by a stop or
 * a crash leaves rows that the next run (re-queued at stop, or by the resume worker at start) removes.
 */
export const organizationPurgeJob = defineJob(
  'organization.purge',
  async (deps, data, job) => {
    const repository = repositoryOf(deps, 'organization');
    const em = repository.fork();
    const orgId = data.organization_id;
    // Gone (null) or not deleted (false): nothing to remove.
    if (!(await repository.isDeleted(em, orgId))) return;

    const since = data.settle_since ?? Date.now();
    const waited = Date.now() - since;
    if (waited < ORGANIZATION_SETTLE_MAX_MS) {
      await deps.apiUsage.flush();
      const busy = waited < SETTLE_MIN_MS ? 'api usage' : await organizationBusy(deps, em, orgId);
      if (busy) {
        await requeue(deps, { organization_id: orgId, settle_since: since }, SETTLE_POLL_MS);
        return;
      }
    }

    const steps = organizationRemovalSteps(deps);
    const last = steps.filter((s) => s.table === 'organizations');
    const rest = steps.filter((s) => s.table !== 'organizations');
    let total = 0;
    for (const pass of [rest, rest, last]) {
      for (const step of pass) {
        for (;;) {
          if (job.signal.aborted) {
            // Stopping: the rest is for the next run.
            await requeue(deps, { organization_id: orgId, settle_since: since }, 0);
            return;
          }
          const n = await removeOrganizationBatch(em, step, orgId, organizationPurgeTuning.batchSize);
          total += n;
          if (n > 0) organizationPurgeTuning.afterBatch?.(step, n);
          if (n < organizationPurgeTuning.batchSize) break;
        }
      }
    }
    deps.log.info({ organization_id: orgId, rows: total }, 'deleted organization removed');
  },
  { retryLimit: 5, retryDelaySeconds: 5, payload: purgeJobPayload },
);

async function requeue(deps: AppDeps, data: PurgeJobData, delayMs: number): Promise<void> {
  await deps.jobs.send(organizationPurgeJob, data, { delayMs });
}

/**
 * At start: a removal job for every organization marked deleted whose row is still there (a process killed in the
 * middle leaves its job `active` until its lease lapses, docs/operating.md "Jobs and crash recovery"; this resumes at once).
 */
export const organizationPurgeResumer = {
  name: 'organization.purge-resumer',
  async start(deps: AppDeps): Promise<RunningWorker> {
    const repository = repositoryOf(deps, 'organization');
    const ids = await repository.deletedOrganizationIds(repository.fork());
    for (const id of ids) await deps.jobs.send(organizationPurgeJob, { organization_id: id });
    return { stop: async () => {} };
  },
};
