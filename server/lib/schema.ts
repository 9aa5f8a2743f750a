import { z } from 'zod';
import type { IdPrefix } from './ids.js';

/**
 * Zod primitives every module shares, so that one rule has one wording and one OpenAPI description.
 */

const utf8Bytes = (s: string) => Buffer.byteLength(s, 'utf8');

/** 8 to 72 bytes of UTF-8 (bcrypt reads at most 72): longer is refused, never truncated. */
export const ZNewPassword = z
  .string()
  .refine((s) => utf8Bytes(s) >= 8, 'Password must be at least 8 bytes')
  .refine((s) => utf8Bytes(s) <= 72, 'Password must be at most 72 bytes (UTF-8)')
  .describe('8 to 72 bytes of UTF-8');

/** A password being checked (login): any non-empty string bcrypt can read. */
export const ZPassword = z
  .string()
  .min(1)
  .refine((s) => utf8Bytes(s) <= 72, 'Password must be at most 72 bytes (UTF-8)');

export const ZEmail = z
  .email('Must be a valid email address')
  .max(320)
  .transform((s) => s.toLowerCase())
  .describe('Email address (case-insensitive)');

/** An empty body: any field is refused (unknown body fields are errors, README "Requests"). */
export const ZEmptyInput = z.strictObject({});
/** No query parameters; unknown ones are ignored. */
export const ZNoQuery = z.object({});

/**
 * A resource id in a path (`/vpn/connections/{id}`). Any string is accepted here: a malformed or unknown id is
 * answered 404 by the service (never 400, which would tell a well-formed id from another).
 */
export function zPathId(prefix: IdPrefix, what: string) {
  return z.string().describe(`${what} id, \`${prefix}_…\``);
}
