import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

export function sha256Hex(input: string): string {
  return createHash('sha256').update(input).digest('hex');
}

/** A URL-safe random token with the given prefix and at least `bits` of entropy. */
export function randomToken(prefix: string, bits = 256): string {
  return `${prefix}${randomBytes(Math.ceil(bits / 8)).toString('base64url')}`;
}

const CIPHER = 'aes-256-gcm';

/**
 * Encrypts a short secret for storage (AES-256-GCM with a random 96-bit nonce): `v1.<nonce>.<tag>.<ciphertext>`,
 * base64url parts. `key` is 32 bytes.
 */
export function encryptSecret(key: Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv(CIPHER, key, iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv, cipher.getAuthTag(), body]
    .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
    .join('.');
}

/** What encryptSecret produces: a 96-bit nonce and a 128-bit tag, base64url. */
const ENCRYPTED = /^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]*$/;

/**
 * Whether a stored value is what encryptSecret produced. Values written before their column was encrypted are still
 * in clear until rewritten (docs/security.md, "Encryption at rest"); callers read those as they are.
 */
export function isEncryptedSecret(stored: string): boolean {
  return ENCRYPTED.test(stored);
}

/** Decrypts what encryptSecret produced with the same key; throws if it was altered or the key differs. */
export function decryptSecret(key: Buffer, stored: string): string {
  const [version, iv, tag, body] = stored.split('.');
  if (version !== 'v1' || !iv || !tag || body === undefined) throw new Error('not an encrypted secret');
  const decipher = createDecipheriv(CIPHER, key, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
}
