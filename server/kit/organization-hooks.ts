import type { Em } from '../db/orm.js';
import type { AppDeps } from './deps.js';

/**
 * Runs every module's `onOrganizationCreated` inside the transaction that creates the organization (auth's
 * createOrganizationWithOwner), in manifest order: a module keeps its per-organization rows (billing's subscription)
 * without the creating module importing it.
 */
export async function runOrganizationCreatedHooks(
  deps: AppDeps,
  tx: Em,
  organization: { id: string },
  now: Date,
): Promise<void> {
  for (const m of deps.registry.modules) await m.onOrganizationCreated?.(tx, organization, now, deps);
}
