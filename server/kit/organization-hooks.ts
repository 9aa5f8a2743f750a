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

/**
 * Runs every module's `onOrganizationDeleted` inside the transaction that deletes the organization, in manifest
 * order.
 */
export async function runOrganizationDeletedHooks(
  deps: AppDeps,
  tx: Em,
  organization: { id: string },
  now: Date,
): Promise<void> {
  for (const m of deps.registry.modules) await m.onOrganizationDeleted?.(tx, organization, now, deps);
}

/** Whether a module still has work to finish for a deleted organization before its rows go (manifest `busy`). */
export async function organizationBusy(
  deps: AppDeps,
  em: Em,
  organizationId: string,
): Promise<string | null> {
  for (const m of deps.registry.modules) {
    if (await m.organizationRows?.busy?.(em, organizationId)) return m.name;
  }
  return null;
}

/** Every removal step of every module, in the order they run (manifest order; the core's steps come last). */
export function organizationRemovalSteps(
  deps: Pick<AppDeps, 'registry'>,
): { module: string; table: string; where: string }[] {
  return deps.registry.modules.flatMap((m) =>
    (m.organizationRows?.remove ?? []).map((s) => ({
      module: m.name,
      table: s.table,
      where: s.where ?? `"organization_id" = ?`,
    })),
  );
}

/**
 * Removes one batch of at most `limit` rows of the organization from `table`: one short statement (its own
 * transaction), so that no lock is held for long and a stop loses nothing. Returns the number of rows removed.
 */
export async function removeOrganizationBatch(
  em: Em,
  step: { table: string; where: string },
  organizationId: string,
  limit: number,
): Promise<number> {
  const res = await em.execute(
    `delete from "${step.table}" where ctid = any(array(
       select ctid from "${step.table}" where ${step.where} limit ${Math.max(1, Math.floor(limit))}))`,
    [organizationId],
    'run',
  );
  return Number((res as { affectedRows?: number }).affectedRows ?? 0);
}
