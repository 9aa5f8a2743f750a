import { LockMode } from '@mikro-orm/core';
import { recordEvent } from '../../events/record-event.js';
import type { AppDeps } from '../../kit/deps.js';
import { defineJob } from '../../kit/jobs.js';
import { VpnConnection } from './vpn-connection.entity.js';
import { VpnServer } from './vpn-server.entity.js';
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
  const em = deps.db.orm.em.fork();
  await em.transactional(async (tx) => {
    const now = deps.clock.now();
    const c = await tx.findOne(
      VpnConnection,
      { id: data.connection_id },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    if (!c || c.status !== 'connecting' || c.connectGeneration !== data.generation) return;
    const server = await tx.findOneOrFail(VpnServer, c.server.id);
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
    recordEvent(tx, vpnConnected, toConnectionDetailDto(c, server, now), c.organization.id, now);
  });
}

/** Stores the simulated usage of every active connection (a periodic job), so stored totals stay recent. */
export async function storeActiveUsage(deps: AppDeps): Promise<number> {
  const em = deps.db.orm.em.fork();
  const now = deps.clock.now();
  const rows = await em.execute<{ id: string }[]>(
    `update vpn_connections set
        upload_bytes = greatest(upload_bytes,
          session_upload_base + floor(upload_rate * extract(epoch from (?::timestamptz - connected_at)))),
        download_bytes = greatest(download_bytes,
          session_download_base + floor(download_rate * extract(epoch from (?::timestamptz - connected_at)))),
        last_activity = greatest(last_activity, ?::timestamptz)
      where status = 'active' and connected_at is not null and connected_at <= ?
        and (upload_rate > 0 or download_rate > 0)
      returning id`,
    [now, now, now, now],
  );
  return rows.length;
}
