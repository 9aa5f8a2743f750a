import { hkdfSync } from 'node:crypto';
import {
  AtRestKeyError,
  decryptSecret,
  encryptSecret,
  isEncryptedSecret,
  keyRing,
  type KeyRing,
} from '../lib/crypto.js';
import type { AppDeps } from './deps.js';

/** The purposes of the at-rest keys, each derived from TWO_FACTOR_KEY with HKDF (docs/security.md). */
export type AtRestPurpose = keyof AppDeps['keys'];

/**
 * Each purpose's HKDF info. `secrets` encrypts every secret a module stores (two-factor secrets, webhook signing
 * secrets, hosting variables); its info names the first of them and never changes, since it derives the key of
 * what is stored.
 */
const PURPOSES: Record<AtRestPurpose, string> = {
  secrets: 'two-factor secrets',
  idempotency: 'idempotency records',
};

/**
 * The key rings of every purpose: the current key derived from `current`, and the one derived from `previous` (the
 * secret being rotated out, TWO_FACTOR_KEY_PREVIOUS) still accepted for decryption.
 */
export function atRestKeyRings(current: string, previous?: string): AppDeps['keys'] {
  const derive = (secret: string, purpose: string) =>
    Buffer.from(hkdfSync('sha256', secret, '', purpose, 32));
  const ring = (purpose: string) =>
    keyRing(derive(current, purpose), previous === undefined ? [] : [derive(previous, purpose)]);
  return { secrets: ring(PURPOSES.secrets), idempotency: ring(PURPOSES.idempotency) };
}

/** A column that holds values encrypted at rest (a module manifest's `atRest`). */
export interface AtRestColumn {
  table: string;
  column: string;
  /** Which of `deps.keys` encrypts it. */
  key: AtRestPurpose;
  /** The columns that identify a row (default `id`). */
  rowKey?: readonly string[];
  /**
   * A `json` column holding the ciphertext as a JSON string; anything else in it (an object stored in clear before
   * encryption at rest) is left to the module's `encryptAtRest` step.
   */
  json?: boolean;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;
const quote = (name: string) => {
  if (!IDENTIFIER.test(name)) throw new Error(`not a plain identifier: ${name}`);
  return `"${name}"`;
};

const PAGE = 200;

/**
 * Rewrites under the current key every value of `col` that is not under it yet: values of the previous key, and
 * values written before key ids (`v1`). Each row is rewritten only if it still holds the value read (a write by
 * another process meanwhile wins), one row at a time, so an interrupted pass loses nothing and the next one carries
 * on. A value that no configured key opens stops the pass with AtRestKeyError, leaving it as it is. Returns how many
 * rows were rewritten.
 */
export async function reencryptColumn(deps: AppDeps, col: AtRestColumn): Promise<number> {
  const ring: KeyRing = deps.keys[col.key];
  const em = deps.db.orm.em.fork();
  const table = quote(col.table);
  const column = quote(col.column);
  const keys = (col.rowKey ?? ['id']).map(quote);
  const value = col.json ? `${column}::text` : column;
  const current = `${col.json ? '"' : ''}v2.${ring.current.id}.`;
  const rowKeyOf = (row: Record<string, unknown>) => (col.rowKey ?? ['id']).map((k) => row[k]);
  let after: unknown[] | undefined;
  let changed = 0;
  for (;;) {
    const rows: Record<string, unknown>[] = await em.execute(
      `select ${keys.join(', ')}, ${value} as "value" from ${table}
        where ${column} is not null and left(${value}, ${current.length}) <> ?
          ${after ? `and (${keys.join(', ')}) > (${keys.map(() => '?').join(', ')})` : ''}
        order by ${keys.join(', ')} limit ${PAGE}`,
      [current, ...(after ?? [])],
    );
    for (const row of rows) {
      const stored = row.value as string;
      const raw: unknown = col.json ? JSON.parse(stored) : stored;
      if (typeof raw !== 'string' || !isEncryptedSecret(raw)) continue;
      let plain: string;
      try {
        plain = decryptSecret(ring, raw);
      } catch (err) {
        if (!(err instanceof AtRestKeyError)) throw err;
        throw new AtRestKeyError(
          `${col.table}.${col.column} (row ${rowKeyOf(row).join('/')}) ${err.message}: set TWO_FACTOR_KEY to the ` +
            'key the data was written with, or, during a rotation, that key as TWO_FACTOR_KEY_PREVIOUS ' +
            '(docs/security.md, "Rotating the at-rest key")',
        );
      }
      const sealed = encryptSecret(ring, plain);
      const updated: unknown[] = await em.execute(
        `update ${table} set ${column} = ?${col.json ? '::json' : ''}
          where ${keys.map((k) => `${k} = ?`).join(' and ')} and ${value} = ?
         returning 1`,
        [col.json ? JSON.stringify(sealed) : sealed, ...rowKeyOf(row), stored],
      );
      changed += updated.length;
    }
    if (rows.length < PAGE) return changed;
    after = rowKeyOf(rows[rows.length - 1]!);
  }
}

/**
 * The start-up pass over every module's `atRest` columns (after the `encryptAtRest` steps, before any worker runs):
 * what the previous key or no key id encrypted is rewritten under the current key; a value no configured key opens
 * fails the start (docs/security.md, "Rotating the at-rest key"). Returns the rows rewritten per `table.column`.
 */
export async function reencryptAtRest(
  deps: AppDeps,
  columns: readonly AtRestColumn[],
): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const col of columns) {
    const n = await reencryptColumn(deps, col);
    if (n > 0) counts[`${col.table}.${col.column}`] = n;
  }
  return counts;
}
