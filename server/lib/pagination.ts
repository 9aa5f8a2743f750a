import { z } from 'zod';
import { validation } from './errors.js';
import { okResponse } from './schema.js';

/** Paging parameters (docs/getting-started.md, "Calling the API"). */
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

const ZStartingAfter = z
  .string()
  .min(1)
  .max(64)
  .optional()
  .describe('Id of the last item of the previous page; the list continues after it');

/**
 * Query fields of a page list (`?page=1&limit=20`, or `?limit=20&starting_after=<id>`): spread them into the list's
 * query schema, which should be a plain `z.object` (unknown query parameters are ignored, docs/getting-started.md, "Calling the API"). Out of range or non-integer → 400. `z.coerce` is explicit because query values arrive as strings over REST
 * and as numbers over `/trpc`. Read them with pageRequest().
 */
export const pageQueryShape = {
  page: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_PAGE)
    .optional()
    .describe(
      'Page number, starting at 1 (default 1). A page costs its offset: deep in a large list, page with `starting_after` instead',
    ),
  limit: ZLimit,
  starting_after: ZStartingAfter.describe(
    'Id of the last item of the previous page: the items after it, at the same cost on any page (docs/api-conventions.md, "Lists"). ' +
      'Not with `page`; an id that is not an item of this list (with these filters) → 400',
  ),
};
export const ZPageQuery = z.object(pageQueryShape);
export type TPageQuery = z.infer<typeof ZPageQuery>;

/** What a page list was asked for: page `page`, or the items after `startingAfter`. */
export interface PageRequest {
  page: number;
  limit: number;
  startingAfter?: string | undefined;
}

/** The page request of a page list's query (`page` and `starting_after` together → 400). */
export function pageRequest(q: TPageQuery): PageRequest {
  if (q.page !== undefined && q.starting_after !== undefined) {
    throw validation('page', 'page and starting_after cannot be used together');
  }
  return { page: q.page ?? 1, limit: q.limit, startingAfter: q.starting_after };
}

/** The paging fields of a page list's response (pageResponseShape). */
export function pageFields(
  request: PageRequest,
  found: { total: number; hasMore: boolean },
): { total: number; page: number | null; limit: number; has_more: boolean } {
  return {
    total: found.total,
    page: request.startingAfter === undefined ? request.page : null,
    limit: request.limit,
    has_more: found.hasMore,
  };
}

/**
 * Query fields of a cursor list (`?limit=20&starting_after=<id>`): the items after the given one, in list order
 * (newest first). Spread into a plain `z.object`.
 */
export const cursorQueryShape = {
  limit: ZLimit,
  starting_after: ZStartingAfter,
};
export const ZCursorQuery = z.object(cursorQueryShape);
export type TCursorQuery = z.infer<typeof ZCursorQuery>;

/** The paging fields of a page list's response body (pageResponse). */
export const pageResponseShape = {
  total: z.number().int().describe('Number of items matching the filters, on all pages (exact)'),
  page: z
    .number()
    .int()
    .nullable()
    .describe('The page returned; `null` when paged with `starting_after`, which has no page number'),
  limit: z.number().int(),
  has_more: z
    .boolean()
    .describe('True when more items follow; pass the last id as `starting_after` (or ask for the next page)'),
};
/** The paging fields of a cursor list's response body. */
export const cursorResponseShape = {
  total: z.number().int().describe('Number of items matching the filters'),
  has_more: z.boolean().describe('True when more items follow; pass the last id as `starting_after`'),
};

/** The items of a list under `key`, as the response shape of a list. */
function itemsShape<K extends string, T extends z.ZodType>(key: K, item: T) {
  return { [key]: z.array(item) } as { [P in K]: z.ZodArray<T> };
}

/** The success body of a page list: `{ success: true, <key>: [item], total, page, limit, has_more }`. */
export function pageResponse<K extends string, T extends z.ZodType>(key: K, item: T) {
  return okResponse({ ...itemsShape(key, item), ...pageResponseShape });
}

/** The success body of a cursor list: `{ success: true, <key>: [item], total, has_more }`. */
export function cursorResponse<K extends string, T extends z.ZodType>(key: K, item: T) {
  return okResponse({ ...itemsShape(key, item), ...cursorResponseShape });
}

/** Newest first, ties broken by id (docs/getting-started.md, "Calling the API"): every list uses this order. */
export const NEWEST_FIRST = { createdAt: 'desc', id: 'desc' } as const;

/** `LIMIT` and `OFFSET` of a page. */
export function pageWindow(q: { page: number; limit: number }): { limit: number; offset: number } {
  return { limit: q.limit, offset: (q.page - 1) * q.limit };
}
