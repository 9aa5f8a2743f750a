import { z } from 'zod';
import type { EntityName, FilterQuery, FindOptions } from '@mikro-orm/core';
import type { Em } from '../db/orm.js';
import { AppError } from './errors.js';

/** Paging parameters of conventions §6. */
export const DEFAULT_PAGE_LIMIT = 20;
export const MAX_PAGE_LIMIT = 100;
/** Keeps `(page - 1) * limit` a safe integer and a sane OFFSET. */
export const MAX_PAGE = 1_000_000_000;

const ZLimit = z.coerce
  .number()
  .int()
  .min(1)
  .max(MAX_PAGE_LIMIT)
  .default(DEFAULT_PAGE_LIMIT)
  .describe(`Items per page, 1 to ${MAX_PAGE_LIMIT} (default ${DEFAULT_PAGE_LIMIT})`);

/**
 * Query fields of a page list (`?page=1&limit=20`): spread them into the list's query schema, which should be a
 * plain `z.object` (unknown query parameters are ignored, conventions §1). Out of range or non-integer → 400.
 * `z.coerce` is explicit because query values arrive as strings over REST and as numbers over `/trpc`.
 */
export const pageQueryShape = {
  page: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_PAGE)
    .default(1)
    .describe('Page number, starting at 1 (default 1)'),
  limit: ZLimit,
};
export const ZPageQuery = z.object(pageQueryShape);
export type TPageQuery = z.infer<typeof ZPageQuery>;

/**
 * Query fields of a cursor list (`?limit=20&starting_after=<id>`): the items after the given one, in list order
 * (newest first). Spread into a plain `z.object`.
 */
export const cursorQueryShape = {
  limit: ZLimit,
  starting_after: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe('Id of the last item of the previous page; the list continues after it'),
};
export const ZCursorQuery = z.object(cursorQueryShape);
export type TCursorQuery = z.infer<typeof ZCursorQuery>;

/** The paging fields of a page list's response body, for `z.object({ items: ..., ...pageResponseShape })`. */
export const pageResponseShape = {
  total: z.number().int().describe('Number of items matching the filters, on all pages'),
  page: z.number().int(),
  limit: z.number().int(),
};
/** The paging fields of a cursor list's response body. */
export const cursorResponseShape = {
  total: z.number().int().describe('Number of items matching the filters'),
  has_more: z.boolean().describe('True when more items follow; pass the last id as `starting_after`'),
};

/** Newest first, ties broken by id (conventions §6): every list uses this order. */
export const NEWEST_FIRST = { createdAt: 'desc', id: 'desc' } as const;

export interface Paged<T> {
  items: T[];
  total: number;
  page: number;
  limit: number;
}

/** `LIMIT` and `OFFSET` of a page. */
export function pageWindow(q: { page: number; limit: number }): { limit: number; offset: number } {
  return { limit: q.limit, offset: (q.page - 1) * q.limit };
}

type ListOptions<T extends object> = Omit<FindOptions<T, never>, 'limit' | 'offset' | 'orderBy'>;

/**
 * One page of `entity` rows matching `where` (which must already carry the tenant/owner scope: see
 * access/scope.ts), newest first, with the total.
 */
export async function findPage<T extends { id: string; createdAt: Date }>(
  em: Em,
  entity: EntityName<T>,
  where: FilterQuery<T>,
  q: { page: number; limit: number },
  options: ListOptions<T> = {},
): Promise<Paged<T>> {
  const [items, total] = await em.findAndCount(entity, where as never, {
    ...(options as object),
    orderBy: NEWEST_FIRST as never,
    ...pageWindow(q),
  });
  return { items, total, page: q.page, limit: q.limit };
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
  options: ListOptions<T> = {},
): Promise<CursorPaged<T>> {
  let window: FilterQuery<T> = where;
  if (q.starting_after) {
    const cursor = (await em.findOne(entity, { $and: [where, { id: q.starting_after }] } as never, {
      fields: ['id', 'createdAt'] as never,
    })) as T | null;
    if (!cursor) {
      throw new AppError('VALIDATION_ERROR', 'starting_after is not an item of this list', {
        details: [{ path: 'starting_after', message: 'Unknown id' }],
      });
    }
    window = {
      $and: [
        where,
        {
          $or: [
            { createdAt: { $lt: cursor.createdAt } },
            { createdAt: cursor.createdAt, id: { $lt: cursor.id } },
          ],
        },
      ],
    } as FilterQuery<T>;
  }
  // One EntityManager runs one query at a time.
  const rows = await em.find(entity, window as never, {
    ...(options as object),
    orderBy: NEWEST_FIRST as never,
    limit: q.limit + 1,
  });
  const total = await em.count(entity, where as never);
  const items = rows.slice(0, q.limit) as T[];
  return { items, total, has_more: rows.length > q.limit };
}
