import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** What `cloud login` keeps: the API it signed in to and the token pair (refreshed and saved again on expiry). */
export interface StoredCredentials {
  api_url: string;
  email: string;
  token: string;
  refresh_token: string;
}

/**
 * `$XDG_CONFIG_HOME/cloud-platform` (default `~/.config/cloud-platform`; `%APPDATA%\cloud-platform` on Windows).
 */
export function configDirectory(env: NodeJS.ProcessEnv = process.env): string {
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, 'cloud-platform');
  if (process.platform === 'win32' && env.APPDATA) return join(env.APPDATA, 'cloud-platform');
  return join(homedir(), '.config', 'cloud-platform');
}

export const credentialsFile = (env: NodeJS.ProcessEnv = process.env) =>
  join(configDirectory(env), 'credentials.json');

export function loadCredentials(file = credentialsFile()): StoredCredentials | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const parsed = JSON.parse(text) as Partial<StoredCredentials>;
  if (typeof parsed.token !== 'string' || typeof parsed.api_url !== 'string') return undefined;
  return {
    api_url: parsed.api_url,
    email: parsed.email ?? '',
    token: parsed.token,
    refresh_token: parsed.refresh_token ?? '',
  };
}

/**
 * Writes the file readable by its owner only (0600, in a 0700 directory), replacing the old one in one step so that
 * a crash never leaves half a file.
 */
export function saveCredentials(credentials: StoredCredentials, file = credentialsFile()): void {
  const dir = join(file, '..');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  chmodSync(temporary, 0o600);
  renameSync(temporary, file);
}

export function removeCredentials(file = credentialsFile()): void {
  rmSync(file, { force: true });
}
