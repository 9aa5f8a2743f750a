import type { JobQueue } from './jobs/queue.js';
import { purgeExpiredSessions } from './modules/auth/auth.service.js';
import { defineVpnJobs } from './modules/vpn/vpn.jobs.js';
import { OutboxRelay } from './events/outbox.js';
import { pruneDispatchedEvents } from './events/record-event.js';
import { closeWebhookHttpClient } from './modules/webhooks/delivery-attempt.js';
import { fanOutToWebhooks } from './modules/webhooks/delivery-fanout.js';
import { DeliveryWorker } from './modules/webhooks/delivery-worker.js';
import type { AppDeps } from './trpc/context.js';

/** Every background job of every module, registered on the queue before it starts. */
export function defineJobs(jobs: JobQueue, deps: AppDeps): void {
  jobs.define({
    name: 'auth.purge-expired-sessions',
    cron: '17 * * * *',
    handler: async () => {
      const n = await purgeExpiredSessions(deps);
      if (n > 0) deps.log.info({ purged: n }, 'purged expired login sessions');
    },
  });
  jobs.define({
    name: 'events.prune-dispatched',
    cron: '41 3 * * *',
    handler: async () => {
      const n = await pruneDispatchedEvents(deps.db.orm.em.fork(), deps.clock.now());
      if (n > 0) deps.log.info({ pruned: n }, 'pruned relayed events');
    },
  });
  defineVpnJobs(jobs, deps);
}

export interface Workers {
  relay: OutboxRelay;
  deliveries: DeliveryWorker;
}
const runningWorkers = new WeakMap<AppDeps, Workers>();

/**
 * Long-running workers that claim their own rows rather than pg-boss jobs: the event relay (outbox → webhook
 * deliveries) and the webhook delivery worker. Started after the job queue, stopped before it.
 */
export async function startWorkers(deps: AppDeps): Promise<Workers> {
  const deliveries = new DeliveryWorker(deps);
  const relay = new OutboxRelay(deps, [fanOutToWebhooks]);
  relay.onRelayed(() => deliveries.nudge());
  deliveries.start();
  await relay.start();
  const workers = { relay, deliveries };
  runningWorkers.set(deps, workers);
  return workers;
}

/** The running workers of a process (tests use them to relay or deliver now). */
export function workersOf(deps: AppDeps): Workers | undefined {
  return runningWorkers.get(deps);
}

export async function stopWorkers(deps: AppDeps): Promise<void> {
  const workers = runningWorkers.get(deps);
  runningWorkers.delete(deps);
  if (workers) {
    await workers.relay.stop();
    await workers.deliveries.stop();
  }
  closeWebhookHttpClient(deps);
}
