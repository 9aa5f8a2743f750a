import type { EntityName, FilterQuery, FindOptions } from '@mikro-orm/core';
import { NEWEST_FIRST, pageWindow, type PageRequest } from '../lib/pagination.js';
import { countSql, type ListCountSpec } from './list-counts.js';
import type { Em } from './orm.js';
import { unknownCursor } from './raw-page.js';

/** The paged reads of every list (docs/api-conventions.md, "Lists"); the query and response shapes are in server/lib/pagination.ts. */

type ListOptions<T extends object> = Omit<FindOptions<T, never>, 'limit' | 'offset' | 'orderBy'>;

export interface Paged<T> {
  items: T[];
  total: number;
  hasMore: boolean;
}

/** A list's maintained counts (db/list-counts.ts) and the filter, by the counts' keys, that `where` applies. */
export interface Counted {
  spec: ListCountSpec;
  filter: Record<string, string>;
}

/** The total of a list from its maintained counts (db/list-counts.ts), or by counting when it has none. */
async function listTotal<T extends object>(
  em: Em,
  entity: EntityName<T>,
  where: FilterQuery<T>,
  counted: Counted | undefined,
): Promise<number> {
  const params: unknown[] = [];
  const sql = counted
    ? countSql(counted.spec, counted.filter, (v) => {
        params.push(v);
        return '?';
      })
    : null;
  if (!sql) return em.count(entity, where as never);
  const [row] = await em.execute<{ total: string | number }[]>(`select ${sql} as total`, params);
  return Number(row?.total ?? 0);
}

/** The rows after `startingAfter` within `where`: 400 when it is not one of them (another tenant's id reveals nothing). */
async function afterCursor<T extends { id: string; createdAt: Date }>(
  em: Em,
  entity: EntityName<T>,
  where: FilterQuery<T>,
  startingAfter: string,
): Promise<FilterQuery<T>> {
  const cursor = (await em.findOne(entity, { $and: [where, { id: startingAfter }] } as never, {
    fields: ['id', 'createdAt'] as never,
  })) as T | null;
  if (!cursor) throw unknownCursor();
  // `createdAt <= ` bounds the index range; the `$or` orders ties by id.
  return {
    $and: [
      where,
      { createdAt: { $lte: cursor.createdAt } },
      {
        $or: [{ createdAt: { $lt: cursor.createdAt } }, { id: { $lt: cursor.id } }],
      },
    ],
  } as FilterQuery<T>;
}

/**
 * One page of `entity` rows matching `where` (which must already carry the tenant/owner scope: see
 * access/scope.ts), newest first, with the total (from the list's maintained counts when `counted` is given):
 * page `page`, or with `startingAfter` the rows after that one.
 */
export async function findPage<T extends { id: string; createdAt: Date }>(
  em: Em,
  entity: EntityName<T>,
  where: FilterQuery<T>,
  q: PageRequest,
  options: ListOptions<T> & { counted?: Counted } = {},
): Promise<Paged<T>> {
  const { counted, ...findOptions } = options;
  const window = q.startingAfter
    ? { where: await afterCursor(em, entity, where, q.startingAfter), offset: 0 }
    : { where, offset: pageWindow(q).offset };
  // One EntityManager runs one query at a time.
  const rows = await em.find(entity, window.where as never, {
    ...(findOptions as object),
    orderBy: NEWEST_FIRST as never,
    limit: q.limit + 1,
    offset: window.offset,
  });
  const total = await listTotal(em, entity, where, counted);
  return { items: rows.slice(0, q.limit), total, hasMore: rows.length > q.limit };
}

export interface CursorPaged<T> {
  items: T[];
  total: number;
  has_more: boolean;
}

/**
 * Items after `starting_after` (newest first) among the rows matching `where` (already scoped). A
 * `starting_after` that is not one of those rows → 400, so another tenant's id reveals nothing.
 */
export async function findCursorPage<T extends { id: string; createdAt: Date }>(
  em: Em,
  entity: EntityName<T>,
  where: FilterQuery<T>,
  q: { limit: number; starting_after?: string | undefined },
  options: ListOptions<T> & { counted?: Counted } = {},
): Promise<CursorPaged<T>> {
  const { counted, ...findOptions } = options;
  const window = q.starting_after ? await afterCursor(em, entity, where, q.starting_after) : where;
  // One EntityManager runs one query at a time.
  const rows = await em.find(entity, window as never, {
    ...(findOptions as object),
    orderBy: NEWEST_FIRST as never,
    limit: q.limit + 1,
  });
  const total = await listTotal(em, entity, where, counted);
  const items = rows.slice(0, q.limit) as T[];
  return { items, total, has_more: rows.length > q.limit };
}
