import type { Em } from '../../db/orm.js';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import type { ActorContext, ServiceContext } from '../../kit/deps.js';
import { repositoryOf } from '../../kit/runtime.js';
import { conflict, planLimitExceeded } from '../../lib/errors.js';
import { BACKUP_PLAN_LIMITS } from './databases.constants.js';
import { toBackupDto } from './databases.dto.js';
import { startBackup } from './databases-lifecycle.service.js';
import type {
  TBackupOutput,
  TCreateBackupInput,
  TListBackupsInput,
  TListBackupsOutput,
} from './databases.schema.js';
import { findDatabase, lockDatabase } from './databases.service.js';

/** The backups of one database, newest first (a page list); filters `type` and `status`. */
export async function listBackups(ctx: ActorContext, input: TListBackupsInput): Promise<TListBackupsOutput> {
  const d = await findDatabase(ctx, input.id);
  const request = pageRequest(input);
  const page = await repositoryOf(ctx.deps, 'databases').backupPage(
    ctx.em,
    d.id,
    { type: input.type, status: input.status },
    request,
  );
  return {
    success: true,
    backups: page.items.map((b) => toBackupDto(b, d)),
    ...pageFields(request, page),
  };
}

/** A manual backup: `pending` now, `completed` after the provisioning delay; only while `running`. */
export async function createBackup(ctx: ActorContext, input: TCreateBackupInput): Promise<TBackupOutput> {
  const { deps } = ctx;
  const repo = repositoryOf(deps, 'databases');
  const { backup, database } = await repo.transaction(ctx.em, async (tx) => {
    const now = deps.clock.now();
    const d = await lockDatabase(ctx, tx, input.id);
    if (d.status !== 'running') {
      throw conflict(`The database is ${d.status}: backups can be taken only while it is running`);
    }
    // The backup store is shared: what one organization keeps there is bounded by its plan.
    await assertBackupRoom(ctx, tx, d.organization.id);
    const started = await startBackup(ctx, tx, {
      database: d,
      type: 'manual',
      now,
      name: input.name,
      description: input.description,
    });
    return { backup: started, database: d };
  });
  return { success: true, backup: toBackupDto(backup, database) };
}

/**
 * 402 `PLAN_LIMIT_EXCEEDED` when the organization's backups leave no room for one more manual backup on its plan
 * (`BACKUP_PLAN_LIMITS`, docs/databases.md, "Backup limits"). The plan is read under a share lock and the backups
 * counted after the organization's manual backups queue (databases.repository.ts): they are checked one after the
 * other.
 */
async function assertBackupRoom(ctx: ServiceContext, tx: Em, organizationId: string): Promise<void> {
  const repo = repositoryOf(ctx.deps, 'databases');
  const { plan, status } = await repo.lockPlan(tx, organizationId);
  const used = await repo.lockedBackupUsage(tx, organizationId);
  // A canceled subscription allows nothing new.
  const limits = status === 'canceled' ? { manualBackups: 0, storageGb: 0 } : BACKUP_PLAN_LIMITS[plan];
  if (used.manual >= limits.manualBackups) {
    throw planLimitExceeded(
      `Your plan keeps ${limits.manualBackups} manual backups: delete one, or upgrade the plan with ` +
        'PUT /v1/billing/subscription (the plans: GET /v1/billing/plans)',
      { resource: 'manual_backups', limit: limits.manualBackups, current: used.manual },
    );
  }
  const bytes = limits.storageGb * 1e9;
  if (used.bytes >= bytes) {
    throw planLimitExceeded(
      `Your plan keeps ${limits.storageGb} GB of backups: delete some, or upgrade the plan with ` +
        'PUT /v1/billing/subscription (the plans: GET /v1/billing/plans)',
      { resource: 'backup_storage_bytes', limit: bytes, current: used.bytes },
    );
  }
}
