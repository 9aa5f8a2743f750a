import { PERMISSIONS, type Permission } from '../../access/permissions.js';

/** Lifetime of a key in days, when `expires_in_days` is not given, and the longest allowed (docs/api-keys.md, "API keys"). */
export const DEFAULT_EXPIRES_IN_DAYS = 90;
export const MAX_EXPIRES_IN_DAYS = 365;
/** Characters of the secret kept in clear (`prefix`), so that keys can be told apart. */
export const SECRET_PREFIX_LENGTH = 12;
/** Live keys an organization may hold at once. */
export const MAX_KEYS_PER_ORGANIZATION = 100;

/**
 * The permissions a key may list (docs/api-keys.md, "API keys"): only those some operation open to keys can check. Keys are
 * closed to `/users`, so no `users:*`; no billing operation asks for `billing:delete` (billing has read and write
 * only), so neither it nor `billing:admin`, which implies it.
 */
export const API_KEY_PERMISSIONS = PERMISSIONS.filter(
  (p) => !p.startsWith('users:') && p !== 'billing:delete' && p !== 'billing:admin',
) as readonly Permission[] as [Permission, ...Permission[]];
