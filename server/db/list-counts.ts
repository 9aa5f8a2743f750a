import type { Em } from './orm.js';

/**
 * Exact list totals from `list_counts` (docs/api-conventions.md, "Lists"): the triggers of migration 30 keep, per list, the number of
 * rows of each combination of scope (organization, site or database), owner and enum filters, in the transaction
 * that writes the rows. A total is the sum of the few count rows matching the filters: it costs the same for ten
 * rows as for a million, and stays exact whoever writes the rows (the API, jobs, raw SQL).
 */

/** How a list's filter keys map to the columns of `list_counts` (the same as the list's triggers in migration 30). */
export interface ListCountSpec {
  /** `list_counts.list`. */
  list: string;
  /** The filter key every read of the list fixes (→ `scope_id`), e.g. `organization`, `site`, `database`. */
  scope: string;
  /** The filter key counted per owner (→ `owner_id`; '' holds the total of all owners). */
  owner?: string;
  /** Counts kept in shards (`owner_id` is a shard number: migration 30), summed whatever the owner. */
  sharded?: boolean;
  /** The enum filter keys (→ `d1`, `d2`, `d3`), with their values (the page reads expand the ones not fixed). */
  dims: readonly { key: string; values: readonly string[] }[];
}

/**
 * The SQL of the total of the rows matching `filter` (equality on string values, the keys of `spec` only), with
 * `param` placing each value as a parameter; `null` when a filter key is not counted (then count the rows).
 */
export function countSql(
  spec: ListCountSpec,
  filter: Record<string, unknown>,
  param: (value: unknown) => string,
): string | null {
  const known = new Set([spec.scope, ...(spec.owner ? [spec.owner] : []), ...spec.dims.map((d) => d.key)]);
  if (typeof filter[spec.scope] !== 'string') return null;
  for (const [key, value] of Object.entries(filter))
    if (!known.has(key) || typeof value !== 'string') return null;
  const parts = [`"list" = ${param(spec.list)}`, `"scope_id" = ${param(filter[spec.scope])}`];
  if (!spec.sharded) {
    parts.push(
      `"owner_id" = ${spec.owner && typeof filter[spec.owner] === 'string' ? param(filter[spec.owner]) : "''"}`,
    );
  }
  spec.dims.forEach((d, i) => {
    if (typeof filter[d.key] === 'string') parts.push(`"d${i + 1}" = ${param(filter[d.key])}`);
  });
  return `(select coalesce(sum("n"), 0)::bigint from "list_counts" where ${parts.join(' and ')})`;
}

/**
 * The number of rows of list `list` in scope `scopeId` (all owners) from the maintained counts, with `dims` an
 * optional extra condition on the count columns (e.g. `"d2" <> 'deleting'`). Inside a transaction, what it sees.
 */
export async function countedRows(em: Em, list: string, scopeId: string, dims = 'true'): Promise<number> {
  const [row] = await em.execute<{ n: string | number }[]>(
    `select coalesce(sum("n"), 0) as n from "list_counts" where "list" = ? and "scope_id" = ? and "owner_id" = '' and ${dims}`,
    [list, scopeId],
  );
  return Number(row?.n ?? 0);
}
