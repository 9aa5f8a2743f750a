import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** Directories of `DATA_DIR` (the embedded database, generated secrets): the server's user only (docs/security.md). */
const PRIVATE_DIR_MODE = 0o700;
/** Files of generated secrets. */
const SECRET_FILE_MODE = 0o600;

/**
 * Creates `dir` (and its missing parents) readable by the server's user only. A directory that already exists, is
 * owned by that user and is open to others (created 0755 by an earlier version) is closed to 0700; one owned by
 * someone else is left as it is (an operator's choice).
 */
export function ensurePrivateDir(dir: string): void {
  const path = resolve(dir);
  mkdirSync(path, { recursive: true, mode: PRIVATE_DIR_MODE });
  const st = statSync(path);
  const ownUid = process.getuid?.();
  if ((st.mode & 0o077) !== 0 && (ownUid === undefined || st.uid === ownUid)) {
    chmodSync(path, PRIVATE_DIR_MODE);
  }
}

/**
 * A secret from configuration, else (outside production, where configuration requires it) one generated once into
 * `DATA_DIR/<name>` (mode 0600, in a 0700 directory), so that what it protects survives restarts: the JWT secret,
 * the two-factor key.
 */
export function resolveGeneratedSecret(
  name: string,
  configured: string | undefined,
  dataDir: string,
): string {
  if (configured) return configured;
  const dir = resolve(dataDir);
  const file = join(dir, name);
  ensurePrivateDir(dir);
  if (existsSync(file)) {
    const s = readFileSync(file, 'utf8').trim();
    if (Buffer.byteLength(s) >= 32) {
      // A file written by an earlier version may be readable by others.
      if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, SECRET_FILE_MODE);
      return s;
    }
  }
  const secret = randomBytes(48).toString('base64url');
  writeFileSync(file, `${secret}\n`, { mode: SECRET_FILE_MODE });
  // `mode` applies only when the file is created: a short file being replaced keeps its own.
  chmodSync(file, SECRET_FILE_MODE);
  return secret;
}
