import { z } from 'zod';

/** Paging parameters (README, "Calling the API"). */
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
 * plain `z.object` (unknown query parameters are ignored, README, "Calling the API"). Out of range or non-integer → 400.
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

/** Newest first, ties broken by id (README, "Calling the API"): every list uses this order. */
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
