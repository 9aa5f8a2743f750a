import type { AppDeps } from '../../kit/deps.js';
import { defineJob } from '../../kit/jobs.js';
import { toConnectionDetailDto } from './vpn.dto.js';
import { vpnConnected } from './vpn.events.js';
import { startSession } from './vpn.simulation.js';

export interface ActivateJobData {
  connection_id: string;
  generation: number;
}

/** `connecting` → `active` after the provisioning delay (or `error` if the server went away). */
export const vpnActivateJob = defineJob<ActivateJobData>(
  'vpn.activate',
  (deps, data) => activateConnection(deps, data),
  // The handler is idempotent, so a transient database failure is simply retried.
  { retryLimit: 5, retryDelaySeconds: 1, batchSize: 10 },
);

/** Stores the simulated usage of every active connection, so stored totals stay recent. */
export const vpnSampleUsageJob = defineJob(
  'vpn.sample-usage',
  async (deps) => {
    await storeActiveUsage(deps);
  },
  { cron: '* * * * *' },
);

/**
 * The activation job: `connecting` → `active` (emitting `vpn.connected`), or `error` when the server went away.
 * Idempotent: it acts only on the connection attempt (generation) it was queued for.
 */
export async function activateConnection(deps: AppDeps, data: ActivateJobData): Promise<void> {
  const repo = deps.modules.vpn.repository;
  await repo.transaction(repo.fork(), async (tx) => {
    const now = deps.clock.now();
    const c = await repo.lockConnection(tx, data.connection_id);
    if (!c || c.status !== 'connecting' || c.connectGeneration !== data.generation) return;
    const server = await repo.getServer(tx, c.server.id);
    if (server.deletedAt || server.status !== 'online' || !server.protocols.includes(c.protocol)) {
      c.status = 'error';
      c.statusMessage = `The server in ${c.location} is not accepting connections`;
      c.updatedAt = now;
      return;
    }
    c.status = 'active';
    c.statusMessage = null;
    c.updatedAt = now;
    startSession(c, now);
    repo.recordEvent(tx, vpnConnected, toConnectionDetailDto(c, server, now), c.organization.id, now);
  });
}

/** Stores the simulated usage of every active connection (a periodic job), so stored totals stay recent. */
export async function storeActiveUsage(deps: AppDeps): Promise<number> {
  return deps.modules.vpn.repository.storeActiveUsage(deps.clock.now());
}
