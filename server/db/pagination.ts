import type { EntityName, FilterQuery, FindOptions } from '@mikro-orm/core';
import { AppError } from '../lib/errors.js';
import { NEWEST_FIRST, pageWindow, type Paged } from '../lib/pagination.js';
import type { Em } from './orm.js';

/** The paged reads of every list (README, "Lists"); the query and response shapes are in server/lib/pagination.ts. */

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
