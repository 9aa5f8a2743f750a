import type { Em } from './orm.js';

/**
 * Exact list totals from `list_counts` (docs/api-conventions.md, "Lists"): the triggers of migration 30 keep, per list, the number of
 * rows of each combination of scope (organization, site or database), owner and enum filters, in the transaction
 * that writes the rows, each in up to 16 shards (migration 20261127000020: concurrent writers seldom wait on one
 * row). A total is the sum of the few count rows matching the filters, whatever their shard: it costs the same for
 * ten rows as for a million, and stays exact whoever writes the rows (the API, jobs, raw SQL).
 */

/** How a list's filter keys map to the columns of `list_counts` (the same as the list's triggers in migration 30). */
export interface ListCountSpec {
  /** `list_counts.list`. */
  list: string;
  /** The filter key every read of the list fixes (→ `scope_id`), e.g. `organization`, `site`, `database`. */
  scope: string;
  /** The filter key counted per owner (→ `owner_id`; '' holds the total of all owners). */
  owner?: string;
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
  parts.push(
    `"owner_id" = ${spec.owner && typeof filter[spec.owner] === 'string' ? param(filter[spec.owner]) : "''"}`,
  );
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

const KEY_COLUMNS = ['list', 'scope_id', 'owner_id', 'd1', 'd2', 'd3'] as const;

/**
 * Folds the shards of up to `limit` keys into one row each (the lowest shard's), and removes the keys whose shards
 * sum to 0 (a key written by one connection and emptied by another leaves +n and −n rows behind; so do a site's or a
 * webhook's lists when it goes). Run by the `core.compact-list-counts` job; the totals do not change. One statement:
 * it locks the rows in key order, as the triggers do (so it does not deadlock with a write, which waits for it), and
 * inserts nothing; rows are matched by key and shard, never by their place (a row locked after a wait is a newer
 * version than the statement's snapshot shows). Returns the number of keys folded.
 */
export async function compactListCounts(em: Em, limit = 1000): Promise<number> {
  const k = (alias: string) => KEY_COLUMNS.map((c) => `${alias}."${c}"`).join(', ');
  const [row] = await em.execute<{ n: number }[]>(
    `with locked as materialized (
       select ${k('c')}, "shard", "n" from "list_counts" c
        where (${k('c')}) in (select ${k('g')} from "list_counts" g group by ${k('g')}
                               having count(*) > 1 or sum(g."n") = 0 limit ?)
        order by ${k('c')}, "shard" for update
     ),
     sums as (select ${k('l')}, min(l."shard") as keep, sum(l."n") as total from locked l group by ${k('l')}),
     kept as (
       update "list_counts" c set "n" = s.total from sums s
        where (${k('c')}, c."shard") = (${k('s')}, s.keep) and s.total <> 0 returning 1
     ),
     removed as (
       delete from "list_counts" c using locked l join sums s on (${k('l')}) = (${k('s')})
        where (${k('c')}, c."shard") = (${k('l')}, l."shard") and (s.total = 0 or l."shard" <> s.keep) returning 1
     )
     select (select count(*) from sums)::int as n, (select count(*) from kept) + (select count(*) from removed) as rows`,
    [limit],
  );
  return Number(row?.n ?? 0);
}
