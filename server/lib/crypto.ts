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
 * The keys of one purpose (docs/security.md, "Encryption at rest"): `current` encrypts every new value; `previous`
 * (the key being rotated out) is still accepted for decryption. Each key is 32 bytes and has an `id`, a short
 * fingerprint written into every ciphertext so that a reader knows which key a value needs without trying them.
 */
export interface KeyRing {
  readonly current: AtRestKey;
  readonly previous: readonly AtRestKey[];
}

export interface AtRestKey {
  readonly key: Buffer;
  /** 8 base64url characters: the first 48 bits of SHA-256 over "key id" and the key. */
  readonly id: string;
}

export function atRestKey(key: Buffer): AtRestKey {
  if (key.length !== 32) throw new Error('an at-rest key is 32 bytes');
  const id = createHash('sha256')
    .update('key id\0')
    .update(key)
    .digest()
    .subarray(0, 6)
    .toString('base64url');
  return { key, id };
}

export function keyRing(current: Buffer, previous: readonly Buffer[] = []): KeyRing {
  return { current: atRestKey(current), previous: previous.map(atRestKey) };
}

const ringOf = (keys: Buffer | KeyRing): KeyRing => (Buffer.isBuffer(keys) ? keyRing(keys) : keys);

/** Thrown when no key of the ring opens a stored value: the wrong key, or a value altered in the database. */
export class AtRestKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AtRestKeyError';
  }
}

/**
 * Encrypts a short secret for storage (AES-256-GCM with a random 96-bit nonce) under the ring's current key:
 * `v2.<key id>.<nonce>.<tag>.<ciphertext>`, base64url parts. Older values have no key id: `v1.<nonce>.<tag>.<ciphertext>`.
 */
export function encryptSecret(keys: Buffer | KeyRing, plaintext: string): string {
  const { key, id } = ringOf(keys).current;
  const iv = randomBytes(12);
  const cipher = createCipheriv(CIPHER, key, iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v2', id, iv, cipher.getAuthTag(), body]
    .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
    .join('.');
}

/** What encryptSecret produces (and produced before key ids): a 96-bit nonce and a 128-bit tag, base64url. */
const ENCRYPTED = /^(?:v1|v2\.[A-Za-z0-9_-]{8})\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]*$/;

/**
 * Whether a stored value is what encryptSecret produced. Values written before their column was encrypted are still
 * in clear until rewritten (docs/security.md, "Encryption at rest"); callers read those as they are.
 */
export function isEncryptedSecret(stored: string): boolean {
  return ENCRYPTED.test(stored);
}

function open(key: Buffer, iv: string, tag: string, body: string): string {
  const decipher = createDecipheriv(CIPHER, key, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
}

/**
 * Decrypts what encryptSecret produced with the key it names (or, for a `v1` value, whichever key of the ring opens
 * it); throws AtRestKeyError if no key of the ring does (the key is not configured, or the value was altered).
 */
export function decryptSecret(keys: Buffer | KeyRing, stored: string): string {
  const ring = ringOf(keys);
  if (!isEncryptedSecret(stored)) throw new AtRestKeyError('not an encrypted secret');
  const parts = stored.split('.');
  if (parts[0] === 'v2') {
    const [, id, iv, tag, body] = parts as [string, string, string, string, string];
    const key = [ring.current, ...ring.previous].find((k) => k.id === id);
    if (!key) throw new AtRestKeyError(`encrypted under a key that is not configured (key id ${id})`);
    try {
      return open(key.key, iv, tag, body);
    } catch {
      throw new AtRestKeyError(`does not decrypt with its key (key id ${id}): the stored value was altered`);
    }
  }
  const [, iv, tag, body] = parts as [string, string, string, string];
  for (const k of [ring.current, ...ring.previous]) {
    try {
      return open(k.key, iv, tag, body);
    } catch {
      // The next key of the ring, if any.
    }
  }
  throw new AtRestKeyError('decrypts with no configured key (a value written before key ids)');
}
