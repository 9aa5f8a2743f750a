import { createHash } from 'node:crypto';
import { CompiledQuery, type Transaction } from 'kysely';
import { validation, type AppError } from '../lib/errors.js';
import type { PageRequest } from '../lib/pagination.js';
import { countSql, type ListCountSpec } from './list-counts.js';
import type { Database, Em } from './orm.js';

/**
 * The hot page lists (VPN connections, sites, databases) read one page and its total in one round trip, with rows
 * mapped straight to the list view instead of hydrated into the identity map (docs/benchmarks.md, "Benchmarks"). Outside a
 * transaction the statement is prepared once per connection for each combination of filters and paging mode.
 *
 * Scale (docs/api-conventions.md, "Lists"): the total is a sum of maintained counts (db/list-counts.ts), never a count of the rows;
 * a page is read from an index that starts with the scope (and owner) and every enum filter, then the list's order.
 * Filters left open are expanded into one index range per value combination, merged in order, so that every page
 * read, whatever the filters, reads the rows it returns (plus the `page` offset) and no others. `starting_after`
 * costs the same on any page; a deep `page` costs its offset.
 */

/** A list's columns as `SELECT` expressions and the names its filter keys map to. */
export interface RawPageSpec {
  /** The table, e.g. `vpn_connections`; it must have `created_at` and `id`, indexed newest first. */
  table: string;
  /** The page's select list (with `epochMs()` for times, so that PostgreSQL and PGlite return the same types). */
  select: string;
  /** Filter keys (scope helpers' and the list's filters) → columns; equality only. */
  columns: Readonly<Record<string, string>>;
  /** Conditions every row must meet (e.g. `"removed_at" is null`); the counts' triggers count the same rows. */
  always?: readonly string[];
  /** The list's counts and filter values (migration 30, list_counts). */
  counts: ListCountSpec;
}

/** An epoch-milliseconds expression for a timestamp column. */
export const epochMs = (column: string): string => `(extract(epoch from "${column}") * 1000)::float8`;

/** A `Date` from epochMs()'s value (`null` stays `null`). */
export const fromEpochMs = (v: number | string | null): Date | null =>
  v === null ? null : new Date(Number(v));

/** The error of a `starting_after` that is not an item of the list (as the cursor lists answer: db/pagination.ts). */
export function unknownCursor(): AppError {
  return validation('starting_after', 'Unknown id');
}

const statementNames = new Map<string, string>();

/** A prepared statement's name for one text (one per list and combination of filters). */
function statementName(table: string, sql: string): string {
  let name = statementNames.get(sql);
  if (!name) {
    name = `page_${table.slice(0, 30)}_${createHash('sha1').update(sql).digest('hex').slice(0, 16)}`;
    statementNames.set(sql, name);
  }
  return name;
}

/** Every combination of the values of the dimensions left open. */
function combinations(dims: readonly { column: string; values: readonly string[] }[]): string[][] {
  let out: string[][] = [[]];
  for (const d of dims) out = out.flatMap((c) => d.values.map((v) => [...c, `"${d.column}" = '${v}'`]));
  return out;
}

export interface RawPage<Row> {
  rows: Row[];
  total: number;
  /** True when items follow the returned ones. */
  hasMore: boolean;
}

/**
 * One page of the rows matching `filter` (which must already carry the tenant/owner scope: see access/scope.ts),
 * newest first, with the total: rows come back as selected by `spec.select`. With `starting_after`, the rows after
 * that one (which must match `filter`, or → 400 as on the cursor lists); otherwise page `page`.
 */
export async function findRawPage<Row extends object>(
  em: Em,
  db: Database,
  spec: RawPageSpec,
  filter: Record<string, unknown>,
  request: PageRequest,
): Promise<RawPage<Row>> {
  const params: unknown[] = [];
  const slots = new Map<unknown, string>();
  // A filter value used twice (the rows' condition and the counts') is one parameter.
  const param = (value: unknown): string => {
    let slot = typeof value === 'string' ? slots.get(value) : undefined;
    if (!slot) {
      params.push(value);
      slot = `$${params.length}`;
      if (typeof value === 'string') slots.set(value, slot);
    }
    return slot;
  };

  const conditions: string[] = [...(spec.always ?? [])];
  for (const [key, value] of Object.entries(filter)) {
    const $in =
      key === 'id' && value && typeof value === 'object' ? (value as { $in?: unknown }).$in : undefined;
    if (Array.isArray($in) && $in.length === 0) {
      if (request.startingAfter) throw unknownCursor();
      return { rows: [], total: 0, hasMore: false };
    }
    const column = spec.columns[key];
    if (!column || typeof value !== 'string') throw new Error(`unsupported list filter ${key}`);
    conditions.push(`"${column}" = ${param(value)}`);
  }
  const where = conditions.length ? conditions.join(' and ') : 'true';
  const total = countSql(spec.counts, filter, param) ?? `(select count(*) from ${spec.table} where ${where})`;

  const cursor = request.startingAfter !== undefined;
  const limit = param(request.limit + 1);
  const offset = cursor ? null : param((request.page - 1) * request.limit);
  const after = cursor
    ? ` and ("created_at", "id") < ((select "created_at" from c), (select "id" from c))`
    : '';
  const open = spec.counts.dims
    .filter((d) => filter[d.key] === undefined)
    .map((d) => ({ column: spec.columns[d.key]!, values: d.values }));
  const anyFixed = open.length < spec.counts.dims.length;
  const order = 'order by "created_at" desc, "id" desc';
  // Without enum filters the scope's (or owner's) own index serves the order; with some, one range per
  // combination of the others' values, each bounded by the page's end, merged in order.
  const pageSql = anyFixed
    ? `select * from (${combinations(open)
        .map(
          (c) =>
            `(select ${spec.select}, "created_at" as page_at from ${spec.table} where ${[where, ...c].join(' and ')}${after} ${order} limit ${offset ? `${limit}::int + ${offset}::int` : limit})`,
        )
        .join(
          ' union all ',
        )}) u order by page_at desc, id desc limit ${limit}${offset ? ` offset ${offset}` : ''}`
    : `select ${spec.select} from ${spec.table} where ${where}${after} ${order} limit ${limit}${offset ? ` offset ${offset}` : ''}`;
  const sql = `${cursor ? `with c as (select "created_at", "id" from ${spec.table} where "id" = ${param(request.startingAfter)} and ${where}) ` : ''}
    select t.total${cursor ? ', t.found' : ''}, p.*
      from (select ${total} as total${cursor ? ', exists (select 1 from c) as found' : ''}) t
      left join lateral (${pageSql}) p on true`;

  type Found = Row & { total: number | string; found?: boolean; id: string | null };
  const tx = em.getTransactionContext<Transaction<unknown>>();
  const found = tx
    ? (await tx.executeQuery<Found>(CompiledQuery.raw(sql, params))).rows
    : await db.preparedQuery<Found>(statementName(spec.table, sql), sql, params);
  if (cursor && !found[0]?.found) throw unknownCursor();
  const rows = found.filter((r) => r.id !== null);
  return {
    total: Number(found[0]?.total ?? 0),
    rows: rows.slice(0, request.limit),
    hasMore: rows.length > request.limit,
  };
}
