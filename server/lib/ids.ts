import { randomBytes } from 'node:crypto';

/** Resource id prefixes of the API plus `org`, `evt`, `req`, and internal ones. */
export type IdPrefix =
  | 'org'
  | 'usr'
  | 'ses'
  | 'evt'
  | 'req'
  | 'vpn'
  | 'srv'
  | 'site'
  | 'dep'
  | 'db'
  | 'backup'
  | 'sub'
  | 'inv'
  | 'pm'
  | 'wh'
  | 'del'
  | 'tfa'
  | 'rcv'
  | 'chl'
  | 'pwr'
  | 'aud'
  | 'key'
  | 'sso'
  | 'ssd'
  | 'ssi'
  | 'ssc';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

const ID_CHARS = 20;
// Every request gets an id (X-Request-Id), so random bytes are drawn from the CSPRNG in blocks: one call per 204
// ids instead of one each. No byte is ever used twice.
const POOL_BYTES = ID_CHARS * 204;
let pool = Buffer.alloc(0);
let offset = 0;

function randomChunk(n: number): Buffer {
  if (offset + n > pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  const out = pool.subarray(offset, offset + n);
  offset += n;
  return out;
}

/** `<prefix>_<20 base36 chars>`: 20 × log2(36) ≈ 103 random bits. */
export function newId(prefix: IdPrefix): string {
  const bytes = randomChunk(ID_CHARS);
  let out = '';
  for (const b of bytes) out += ALPHABET[b % 36];
  return `${prefix}_${out}`;
}

/** True when `id` looks like one of ours with this prefix; anything else can only be "not found". */
export function isId(prefix: IdPrefix, id: string): boolean {
  return id.length <= 64 && id.startsWith(`${prefix}_`) && /^[a-z0-9]+$/.test(id.slice(prefix.length + 1));
}

/** What an id names, by its prefix (the `target.type` of audit entries). */
const ID_TYPES: Partial<Record<IdPrefix, string>> = {
  org: 'organization',
  usr: 'user',
  vpn: 'vpn_connection',
  srv: 'vpn_server',
  site: 'site',
  dep: 'deployment',
  db: 'database',
  backup: 'backup',
  sub: 'subscription',
  inv: 'invoice',
  pm: 'payment_method',
  wh: 'webhook',
  del: 'webhook_delivery',
  key: 'api_key',
  ses: 'login_session',
};

/** The resource type an id names (`vpn_…` → `vpn_connection`), or undefined for an id of no known resource. */
export function idType(id: string): string | undefined {
  const prefix = id.slice(0, id.indexOf('_')) as IdPrefix;
  return isId(prefix, id) ? ID_TYPES[prefix] : undefined;
}
