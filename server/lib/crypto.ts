import { createHash, randomBytes } from 'node:crypto';

export function sha256Hex(input: string): string {
  return createHash('sha256').update(input).digest('hex');
}

/** A URL-safe random token with the given prefix and at least `bits` of entropy. */
export function randomToken(prefix: string, bits = 256): string {
  return `${prefix}${randomBytes(Math.ceil(bits / 8)).toString('base64url')}`;
}
