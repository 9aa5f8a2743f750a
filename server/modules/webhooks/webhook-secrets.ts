import { repositoryOf } from '../../kit/runtime.js';
import { decryptSecret, encryptSecret, isEncryptedSecret } from '../../lib/crypto.js';
import type { AppDeps } from '../../kit/deps.js';

/**
 * Webhook signing secrets are stored encrypted (AES-256-GCM with the at-rest key, `deps.keys.secrets`; see
 * docs/security.md). A secret stored before that (it begins `whsec_`, which no ciphertext does) is read as it is and
 * encrypted by the start-up step (encryptClearWebhookSecrets) or the next rotation.
 */
export function sealWebhookSecret(deps: Pick<AppDeps, 'keys'>, secret: string): string {
  return encryptSecret(deps.keys.secrets, secret);
}

export function openWebhookSecret(deps: Pick<AppDeps, 'keys'>, stored: string): string {
  return isEncryptedSecret(stored) ? decryptSecret(deps.keys.secrets, stored) : stored;
}

/**
 * Encrypts the secrets still stored in clear (rows written before encryption at rest). Each row is rewritten only if
 * it still holds the value read, so a rotation by another process meanwhile wins. Returns how many were encrypted.
 */
export async function encryptClearWebhookSecrets(deps: AppDeps): Promise<number> {
  const repository = repositoryOf(deps, 'webhooks');
  const em = repository.fork();
  const rows = await repository.clearSecrets(em);
  const seal = (v: string | null) => (v === null || isEncryptedSecret(v) ? v : sealWebhookSecret(deps, v));
  let changed = 0;
  for (const row of rows) {
    const sealed = { secret: seal(row.secret)!, previousSecret: seal(row.previous_secret) };
    if (await repository.replaceClearSecrets(em, row, sealed)) changed++;
  }
  return changed;
}
