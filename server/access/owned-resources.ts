import type { Em } from '../db/orm.js';
import { invalidAccessToken } from '../lib/errors.js';

/**
 * Resources that belong to a user (VPN connections, databases, sites...), declared by the module that owns them in
 * its manifest (`ownedResources`), so that the access core can act on them without importing any module:
 *
 * - deleting a user moves their rows to the user who deleted them (`resources_transferred_to`, docs/users-and-permissions.md, "Users, roles and permissions"), inside the delete's transaction;
 * - `activity` of `GET /users/:id` counts them.
 *
 * The registry is built at start from the modules' manifests (`deps.registry.ownedResources`).
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
type Entry = Required<Omit<OwnedResource, 'activity' | 'countWhere' | 'afterTransfer'>> & OwnedResource;

/** The user-owned resources of every module, by table. */
export class OwnedResources {
  private readonly entries = new Map<string, Entry>();

  constructor(resources: readonly OwnedResource[] = []) {
    for (const r of resources) this.register(r);
  }

  /** Registers (or re-registers, by table) a user-owned resource. Returns a function that unregisters it. */
  register(resource: OwnedResource): () => void {
    const entry = { ownerColumn: 'user_id', organizationColumn: 'organization_id', ...resource };
    for (const name of [entry.table, entry.ownerColumn, entry.organizationColumn]) {
      if (!IDENTIFIER.test(name)) throw new Error(`owned resource: invalid SQL identifier ${name}`);
    }
    this.entries.set(entry.table, entry);
    return () => {
      if (this.entries.get(entry.table) === entry) this.entries.delete(entry.table);
    };
  }

  list(): readonly OwnedResource[] {
    return [...this.entries.values()];
  }

  /**
   * Moves every registered resource of `fromUserId` to `toUserId` within the organization. Run it inside the
   * transaction that deletes the user. Returns the number of rows moved per table.
   */
  async transfer(em: Em, move: OwnershipMove): Promise<Record<string, number>> {
    const moved: Record<string, number> = {};
    for (const r of this.entries.values()) {
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

  /** The registered activity counters of one user; counters no module registered are 0. */
  async countActivity(
    em: Em,
    who: { organizationId: string; userId: string },
  ): Promise<Record<ActivityCounter, number>> {
    const out = Object.fromEntries(ACTIVITY_COUNTERS.map((c) => [c, 0])) as Record<ActivityCounter, number>;
    for (const r of this.entries.values()) {
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
  if (rows.length === 0)
    throw invalidAccessToken(
      'Access token is no longer valid (signed out, or the user was suspended or removed)',
    );
}
