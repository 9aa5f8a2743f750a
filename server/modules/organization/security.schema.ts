import { z } from 'zod';
import { IP_RANGE_FORMAT, isIpRange } from '../../lib/ip-ranges.js';
import { okResponse } from '../../lib/schema.js';

/** At most this many ranges in `allowed_ip_ranges`. */
export const MAX_ALLOWED_IP_RANGES = 100;
/** `session_max_age` bounds, in seconds: from an hour (as `SESSION_MAX_AGE`) to a year. */
export const SESSION_MAX_AGE_MIN_SECONDS = 3_600;
export const SESSION_MAX_AGE_MAX_SECONDS = 365 * 86_400;

const requireTwoFactor = z
  .boolean()
  .describe(
    'Users without two-factor sign-in who did not sign in through single sign-on get 403 `TWO_FACTOR_REQUIRED` on ' +
      'everything but `GET /auth/me`, `POST /auth/logout`, `POST /auth/2fa/setup` and `POST /auth/2fa/enable`. ' +
      'API keys are not affected.',
  );
const allowedIpRanges = z
  .array(z.string().max(64).refine(isIpRange, IP_RANGE_FORMAT))
  .max(MAX_ALLOWED_IP_RANGES)
  .describe(
    'IPv4 and IPv6 ranges in CIDR notation (a single address is /32 or /128), at most 100: requests of the ' +
      'organization’s users and API keys from any other address get 403 `IP_NOT_ALLOWED`. Empty: no restriction. ' +
      'Stored canonical (host bits cleared, IPv4-mapped IPv6 as IPv4, duplicates dropped).',
  );
const sessionMaxAge = z
  .number()
  .int()
  .min(SESSION_MAX_AGE_MIN_SECONDS)
  .max(SESSION_MAX_AGE_MAX_SECONDS)
  .nullable()
  .describe(
    'The longest a login session lives after its sign-in, in seconds (3600 to 31536000): older sessions are ' +
      'refused (their refresh tokens 401 `INVALID_CREDENTIALS`) and no longer listed. The smaller of it and the ' +
      'server’s `SESSION_MAX_AGE` applies; null: the server’s alone.',
  );

export const ZSecurityPolicy = z
  .object({
    require_two_factor: requireTwoFactor,
    allowed_ip_ranges: z.array(z.string()).describe(allowedIpRanges.description!),
    session_max_age: z.number().int().nullable().describe(sessionMaxAge.description!),
  })
  .describe('The organization’s security policy');
export type TSecurityPolicy = z.infer<typeof ZSecurityPolicy>;

export const ZSecurityOutput = okResponse({ security: ZSecurityPolicy });
export type TSecurityOutput = z.infer<typeof ZSecurityOutput>;

export const ZSetSecurityInput = z.strictObject({
  require_two_factor: requireTwoFactor.optional(),
  allowed_ip_ranges: allowedIpRanges.optional(),
  session_max_age: sessionMaxAge.optional(),
});
export type TSetSecurityInput = z.infer<typeof ZSetSecurityInput>;
