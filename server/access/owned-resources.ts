import type { Em } from '../db/orm.js';
import { AppError } from '../lib/errors.js';

/**
 * Resources that belong to a user (VPN connections, databases, sites...), registered by the module that owns them
 * so that the access core can act on them without importing any module:
 *
 * - deleting a user moves their rows to the user who deleted them (`resources_transferred_to`, conventions §5),
 *   inside the delete's transaction;
 * - `activity` of `GET /users/:id` counts them.
 *
 * A module registers once, at import time, next to its entity:
 *
 * ```ts
 * registerOwnedResource({ table: 'vpn_connections', activity: 'vpn_connections' });
 * ```
 */
export const ACTIVITY_COUNTERS = ['vpn_connections', 'databases_created'] as const;
export type ActivityCounter = (typeof ACTIVITY_COUNTERS)[number];

export interface OwnedResource {
  /** Table name, e.g. `vpn_connections`. */
  table: string;
  /** Column holding the owning user's id (default `user_id`). */
  ownerColumn?: string;
  /** Column holding the organization id (default `organization_id`). */
  organizationColumn?: string;
  /** The `activity` counter these rows feed, if any. */
  activity?: ActivityCounter;
  /**
   * SQL condition (on the table's own columns) of the rows the counter counts, e.g. `"deleted_at" is null`.
   * Every row of the user is transferred regardless.
   */
  countWhere?: string;
  /** Extra work in the same transaction after the rows moved (e.g. to move dependent rows). */
  afterTransfer?: (em: Em, move: OwnershipMove) => Promise<void>;
}

export interface OwnershipMove {
  organizationId: string;
  fromUserId: string;
  toUserId: string;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;
const registry = new Map<
  string,
  Required<Omit<OwnedResource, 'activity' | 'countWhere' | 'afterTransfer'>> & OwnedResource
>();

/** Registers (or re-registers, by table) a user-owned resource. Returns a function that unregisters it. */
export function registerOwnedResource(resource: OwnedResource): () => void {
  const entry = {
    ownerColumn: 'user_id',
    organizationColumn: 'organization_id',
    ...resource,
  };
  for (const name of [entry.table, entry.ownerColumn, entry.organizationColumn]) {
    if (!IDENTIFIER.test(name)) throw new Error(`registerOwnedResource: invalid SQL identifier ${name}`);
  }
  registry.set(entry.table, entry);
  return () => {
    if (registry.get(entry.table) === entry) registry.delete(entry.table);
  };
}

export function ownedResources(): readonly OwnedResource[] {
  return [...registry.values()];
}

/**
 * Moves every registered resource of `fromUserId` to `toUserId` within the organization. Run it inside the
 * transaction that deletes the user. Returns the number of rows moved per table.
 */
export async function transferOwnedResources(em: Em, move: OwnershipMove): Promise<Record<string, number>> {
  const moved: Record<string, number> = {};
  for (const r of registry.values()) {
    const res = await em.execute(
      `update "${r.table}" set "${r.ownerColumn}" = ? where "${r.ownerColumn}" = ? and "${r.organizationColumn}" = ?`,
      [move.toUserId, move.fromUserId, move.organizationId],
      'run',
    );
    moved[r.table] = Number((res as { affectedRows?: number }).affectedRows ?? 0);
    if (r.afterTransfer) await r.afterTransfer(em, move);
  }
  return moved;
}

/**
 * Run first in the transaction that creates a resource for `userId`: takes a share lock on the user's row and fails
 * (UNAUTHORIZED, as the user's token would on the next request) if the user was deleted. Deleting a user locks the
 * row for update and moves their resources in the same transaction, so the two cannot interleave: a create that
 * committed first has its row moved by the delete, and one that waited finds the user gone. Without it, a
 * resource created at the instant of the deletion kept the deleted user as its owner.
 */
export async function lockOwner(em: Em, userId: string): Promise<void> {
  const rows = await em.execute<{ id: string }[]>(
    'select id from users where id = ? and deleted_at is null for share',
    [userId],
  );
  if (rows.length === 0) throw new AppError('UNAUTHORIZED', 'Access token is no longer valid');
}

/** The registered activity counters of one user; counters no module registered are 0. */
export async function countActivity(
  em: Em,
  who: { organizationId: string; userId: string },
): Promise<Record<ActivityCounter, number>> {
  const out = Object.fromEntries(ACTIVITY_COUNTERS.map((c) => [c, 0])) as Record<ActivityCounter, number>;
  for (const r of registry.values()) {
    if (!r.activity) continue;
    const rows = await em.execute<{ n: string | number }[]>(
      `select count(*) as n from "${r.table}" where "${r.ownerColumn}" = ? and "${r.organizationColumn}" = ?` +
        (r.countWhere ? ` and (${r.countWhere})` : ''),
      [who.userId, who.organizationId],
    );
    out[r.activity] += Number(rows[0]?.n ?? 0);
  }
  return out;
}
