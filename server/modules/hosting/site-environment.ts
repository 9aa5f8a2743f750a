import { repositoryOf } from '../../kit/runtime.js';
import { decryptSecret, encryptSecret, isEncryptedSecret } from '../../lib/crypto.js';
import type { AppDeps } from '../../kit/deps.js';

/**
 * What the `environment_variables` column holds: the whole set encrypted as one string (AES-256-GCM with the
 * at-rest key, `deps.keys.secrets`; see docs/security.md), or, for a site written before encryption at rest, the
 * object in clear. A clear set is read as it is and encrypted by the start-up step (encryptClearEnvironments) or the
 * site's next update.
 */
export type StoredEnvironment = Record<string, string> | string;

export function sealEnvironment(deps: Pick<AppDeps, 'keys'>, vars: Record<string, string>): string {
  // JSON keeps the order the variables were given in.
  return encryptSecret(deps.keys.secrets, JSON.stringify(vars));
}

export function openEnvironment(
  deps: Pick<AppDeps, 'keys'>,
  stored: StoredEnvironment | null | undefined,
): Record<string, string> {
  if (stored === null || stored === undefined) return {};
  if (typeof stored === 'string') {
    if (!isEncryptedSecret(stored)) throw new Error('environment variables: unreadable stored value');
    return JSON.parse(decryptSecret(deps.keys.secrets, stored)) as Record<string, string>;
  }
  return { ...stored };
}

/**
 * Encrypts the environment variables still stored in clear. Each row is rewritten only if it still holds the set
 * read (an update by another process meanwhile wins). Returns how many sites were encrypted.
 */
export async function encryptClearEnvironments(deps: AppDeps): Promise<number> {
  const repository = repositoryOf(deps, 'hosting');
  let changed = 0;
  for (const row of await repository.clearEnvironments()) {
    const vars = JSON.parse(row.stored) as Record<string, string>;
    if (await repository.replaceClearEnvironment(row.id, row.stored, sealEnvironment(deps, vars)))
      changed += 1;
  }
  return changed;
}
