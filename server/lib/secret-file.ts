import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * A secret from configuration, else (outside production, where configuration requires it) one generated once into
 * `DATA_DIR/<name>` (mode 0600), so that what it protects survives restarts: the JWT secret, the two-factor key.
 */
export function resolveGeneratedSecret(
  name: string,
  configured: string | undefined,
  dataDir: string,
): string {
  if (configured) return configured;
  const dir = resolve(dataDir);
  const file = join(dir, name);
  if (existsSync(file)) {
    const s = readFileSync(file, 'utf8').trim();
    if (Buffer.byteLength(s) >= 32) return s;
  }
  mkdirSync(dir, { recursive: true });
  const secret = randomBytes(48).toString('base64url');
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}
