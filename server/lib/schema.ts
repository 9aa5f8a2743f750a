import { z } from 'zod';
import type { IdPrefix } from './ids.js';

/**
 * Zod primitives every module shares, so that one rule has one wording and one OpenAPI description.
 */

const utf8Bytes = (s: string) => Buffer.byteLength(s, 'utf8');

/**
 * The limits are in bytes of UTF-8; JSON Schema's `minLength`/`maxLength` count characters (code points). A UTF-8
 * character takes 1 to 4 bytes, so 8 to 72 bytes is 2 to 72 characters at most: the document states those exact
 * character bounds (every accepted password is within them; a client checking them never refuses a valid one) and
 * the byte rule in the description. For ASCII passwords both read 8 to 72.
 */
export const PASSWORD_MIN_BYTES = 8;
export const PASSWORD_MAX_BYTES = 72;

/** 8 to 72 bytes of UTF-8 (bcrypt reads at most 72): longer is refused, never truncated. */
export const ZNewPassword = z
  .string()
  .refine((s) => utf8Bytes(s) >= PASSWORD_MIN_BYTES, 'Password must be at least 8 bytes')
  .refine((s) => utf8Bytes(s) <= PASSWORD_MAX_BYTES, 'Password must be at most 72 bytes (UTF-8)')
  .meta({
    minLength: 2,
    maxLength: PASSWORD_MAX_BYTES,
    description:
      '8 to 72 bytes of UTF-8 (8 to 72 ASCII characters; a character outside ASCII takes 2 to 4 bytes). Longer ' +
      'is refused, never truncated.',
  });

/** A password being checked (login): any non-empty string bcrypt can read. */
export const ZPassword = z
  .string()
  .min(1)
  .refine((s) => utf8Bytes(s) <= PASSWORD_MAX_BYTES, 'Password must be at most 72 bytes (UTF-8)')
  .meta({ maxLength: PASSWORD_MAX_BYTES, description: '1 to 72 bytes of UTF-8' });

export const ZEmail = z
  .email('Must be a valid email address')
  .max(320)
  .transform((s) => s.toLowerCase())
  .describe('Email address (case-insensitive)');

/** An empty body: any field is refused (unknown body fields are errors, docs/api-conventions.md "The envelope"). */
export const ZEmptyInput = z.strictObject({});
/** No query parameters; unknown ones are ignored. */
export const ZNoQuery = z.object({});

/** The longest id the API gives (`isId` in ./ids.ts): what path parameters declare as their `maxLength`. */
export const MAX_ID_LENGTH = 64;

/**
 * A resource id in a path (`/vpn/connections/{id}`). Any string is accepted here: a malformed or unknown id is
 * answered 404 by the service (never 400, which would tell a well-formed id from another). The document states the
 * shape of a real id (at most 64 characters), so that a generated client need not send one that can only be 404.
 */
export function zPathId(prefix: IdPrefix, what: string) {
  return z.string().meta({
    minLength: 1,
    maxLength: MAX_ID_LENGTH,
    description: `${what} id, \`${prefix}_…\``,
  });
}

/** A success body, `{ success: true, ...shape }` (docs/api-conventions.md, "The envelope"): `success` first. */
export function okResponse<S extends z.core.$ZodLooseShape>(shape: S) {
  return z.object({ success: z.literal(true), ...shape });
}

/**
 * The `user_id` filter of a list of resources users own: an owner's id (`usr_…`, or what `description` allows).
 * `description` says what it selects, and for whom.
 */
export function zUserIdFilter(description: string) {
  return z.string().min(1).max(MAX_ID_LENGTH).optional().describe(description);
}
