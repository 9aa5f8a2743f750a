/** Lifetime of a key in days, when `expires_in_days` is not given, and the longest allowed (README, "API keys"). */
export const DEFAULT_EXPIRES_IN_DAYS = 90;
export const MAX_EXPIRES_IN_DAYS = 365;
/** Characters of the secret kept in clear (`prefix`), so that keys can be told apart. */
export const SECRET_PREFIX_LENGTH = 12;
/** Live keys an organization may hold at once. */
export const MAX_KEYS_PER_ORGANIZATION = 100;
