import { repositoryOf } from '../../kit/runtime.js';
import type { AppDeps } from '../../kit/deps.js';
import { DELIVERY_RETENTION_DAYS } from './webhooks.constants.js';

const DAY_MS = 86_400_000;

/** Drops the previous secrets whose overlap has ended (signing already ignores them). */
export async function dropExpiredSecrets(deps: AppDeps): Promise<number> {
  return repositoryOf(deps, 'webhooks').dropExpiredSecrets(deps.clock.now());
}

/** Rows removed per statement by the retention purge. */
const PURGE_CHUNK = 5000;

/**
 * Deliveries are kept `DELIVERY_RETENTION_DAYS` (30) days after their creation, then removed; a delivery still
 * pending (a long custom retry schedule) waits until it ends.
 */
export async function purgeOldDeliveries(deps: AppDeps): Promise<number> {
  const cutoff = new Date(deps.clock.now().getTime() - DELIVERY_RETENTION_DAYS * DAY_MS);
  const repository = repositoryOf(deps, 'webhooks');
  const em = repository.fork();
  let total = 0;
  for (;;) {
    const n = await repository.purgeDeliveries(em, cutoff, PURGE_CHUNK);
    total += n;
    if (n < PURGE_CHUNK) return total;
  }
}
