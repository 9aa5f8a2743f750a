import type { AppDeps } from '../../kit/deps.js';
import { DELIVERY_RETENTION_DAYS } from './webhooks.constants.js';

const DAY_MS = 86_400_000;

/** Drops the previous secrets whose overlap has ended (signing already ignores them). */
export async function dropExpiredSecrets(deps: AppDeps): Promise<number> {
  const now = deps.clock.now();
  const rows = await deps.db.orm.em.fork().execute<{ id: string }[]>(
    `update "webhooks" set "previous_secret" = null, "previous_secret_expires_at" = null
      where "previous_secret_expires_at" <= ?
     returning "id"`,
    [now],
  );
  return rows.length;
}

/** Rows removed per statement by the retention purge. */
const PURGE_CHUNK = 5000;

/**
 * Deliveries are kept `DELIVERY_RETENTION_DAYS` (30) days after their creation, then removed; a delivery still
 * pending (a long custom retry schedule) waits until it ends.
 */
export async function purgeOldDeliveries(deps: AppDeps): Promise<number> {
  const cutoff = new Date(deps.clock.now().getTime() - DELIVERY_RETENTION_DAYS * DAY_MS);
  const em = deps.db.orm.em.fork();
  let total = 0;
  for (;;) {
    const rows = await em.execute<{ id: string }[]>(
      `delete from "webhook_deliveries" where "id" in (
         select "id" from "webhook_deliveries"
          where "created_at" < ? and "status" <> 'pending'
          limit ${PURGE_CHUNK})
       returning "id"`,
      [cutoff],
    );
    total += rows.length;
    if (rows.length < PURGE_CHUNK) return total;
  }
}
