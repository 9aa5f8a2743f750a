import { createHash } from 'node:crypto';
import { CompiledQuery, type Transaction } from 'kysely';
import type { Database, Em } from './orm.js';

/**
 * The hot page lists (VPN connections, sites, databases) read one page and its total in one round trip, with rows
 * mapped straight to the list view instead of hydrated into the identity map (README, "Benchmark"). Outside a
 * transaction the statement is prepared once per connection for each combination of filters: planning the count
 * and the page on every call cost the database more than running them.
 */

/** A list's columns as `SELECT` expressions and the names its filter keys map to. */
export interface RawPageSpec {
  /** The table, e.g. `vpn_connections`; it must have `created_at` and `id`, indexed newest first. */
  table: string;
  /** The page's select list (with `epochMs()` for times, so that PostgreSQL and PGlite return the same types). */
  select: string;
  /** Filter keys (scope helpers' and the list's filters) → columns; equality only. */
  columns: Readonly<Record<string, string>>;
  /** Conditions every row must meet (e.g. `"removed_at" is null`). */
  always?: readonly string[];
}

/** An epoch-milliseconds expression for a timestamp column. */
export const epochMs = (column: string): string => `(extract(epoch from "${column}") * 1000)::float8`;

/** A `Date` from epochMs()'s value (`null` stays `null`). */
export const fromEpochMs = (v: number | string | null): Date | null =>
  v === null ? null : new Date(Number(v));

/**
 * Turns a scope filter plus list filters into SQL: equality on the known columns, and the scope helpers'
 * "nothing" (`id: {$in: []}`, → `null`); anything else is a programming error.
 */
function whereClause(
  spec: RawPageSpec,
  filter: Record<string, unknown>,
): { sql: string; params: unknown[] } | null {
  const parts: string[] = [...(spec.always ?? [])];
  const params: unknown[] = [];
  for (const [key, value] of Object.entries(filter)) {
    const $in =
      key === 'id' && value && typeof value === 'object' ? (value as { $in?: unknown }).$in : undefined;
    if (Array.isArray($in) && $in.length === 0) return null;
    const column = spec.columns[key];
    if (!column || typeof value !== 'string') throw new Error(`unsupported list filter ${key}`);
    params.push(value);
    parts.push(`"${column}" = $${params.length}`);
  }
  return { sql: parts.length ? parts.join(' and ') : 'true', params };
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

/**
 * One page of the rows matching `filter` (which must already carry the tenant/owner scope: see access/scope.ts),
 * newest first, with the total: rows come back as selected by `spec.select`.
 */
export async function findRawPage<Row extends object>(
  em: Em,
  db: Database,
  spec: RawPageSpec,
  filter: Record<string, unknown>,
  page: { page: number; limit: number },
): Promise<{ rows: Row[]; total: number }> {
  const where = whereClause(spec, filter);
  if (!where) return { rows: [], total: 0 };
  const n = where.params.length;
  const sql = `
    select t.total, p.*
      from (select count(*) as total from ${spec.table} where ${where.sql}) t
      left join lateral (
        select ${spec.select}
          from ${spec.table}
         where ${where.sql}
         order by created_at desc, id desc
         limit $${n + 1} offset $${n + 2}
      ) p on true`;
  const params = [...where.params, page.limit, (page.page - 1) * page.limit];
  const tx = em.getTransactionContext<Transaction<unknown>>();
  const found = tx
    ? (
        await tx.executeQuery<Row & { total: number | string; id: string | null }>(
          CompiledQuery.raw(sql, params),
        )
      ).rows
    : await db.preparedQuery<Row & { total: number | string; id: string | null }>(
        statementName(spec.table, sql),
        sql,
        params,
      );
  return {
    total: Number(found[0]?.total ?? 0),
    rows: found.filter((r) => r.id !== null),
  };
}
