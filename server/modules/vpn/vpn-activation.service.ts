import { repositoryOf } from '../../kit/runtime.js';
import type { ServiceContext } from '../../kit/deps.js';
import { toConnectionDetailDto } from './vpn.dto.js';
import { vpnConnected } from './vpn.events.js';
import { startSession } from './vpn.simulation.js';
import { transition } from './vpn-connection-state.js';

/** The connection attempt an activation was queued for. */
export interface ActivateConnectionInput {
  connection_id: string;
  /** The connection's `connectGeneration` when the activation was queued. */
  generation: number;
}

/**
 * The activation (the `vpn.activate` job, vpn.jobs.ts): `connecting` → `active` (emitting `vpn.connected`), or
 * `error` when the server went away. Idempotent: it acts only on the connection attempt (generation) it was queued
 * for.
 */
export async function activateConnection(ctx: ServiceContext, input: ActivateConnectionInput): Promise<void> {
  const repo = repositoryOf(ctx.deps, 'vpn');
  await repo.transaction(ctx.em, async (tx) => {
    const now = ctx.deps.clock.now();
    const c = await repo.lockConnection(tx, input.connection_id);
    if (!c || c.status !== 'connecting' || c.connectGeneration !== input.generation) return;
    const server = await repo.getServer(tx, c.server.id);
    if (server.deletedAt || server.status !== 'online' || !server.protocols.includes(c.protocol)) {
      transition(c, 'error');
      c.statusMessage = `The server in ${c.location} is not accepting connections`;
      c.updatedAt = now;
      return;
    }
    transition(c, 'active');
    c.statusMessage = null;
    c.updatedAt = now;
    startSession(c, now);
    repo.recordEvent(tx, vpnConnected, toConnectionDetailDto(c, server, now), c.organization.id, now);
  });
}

/** Stores the simulated usage of every active connection (the `vpn.sample-usage` job), so stored totals stay recent. */
export async function storeActiveUsage(ctx: ServiceContext): Promise<number> {
  return repositoryOf(ctx.deps, 'vpn').storeActiveUsage(ctx.deps.clock.now());
}
