import type { FilterQuery } from '@mikro-orm/core';
import { findPage } from '../../db/pagination.js';
import type { ActorContext } from '../../kit/deps.js';
import { conflict } from '../../lib/errors.js';
import { toBackupDto } from './databases.dto.js';
import { runAll, startBackup } from './databases.jobs.js';
import type {
  TBackupOutput,
  TCreateBackupInput,
  TListBackupsInput,
  TListBackupsOutput,
} from './databases.schema.js';
import { databaseNotFound, lockDatabase, scopedDatabaseFilter } from './databases.service.js';
import { DatabaseBackup } from './database-backup.entity.js';
import { ManagedDatabase } from './database.entity.js';

/** The backups of one database, newest first (a page list); filters `type` and `status`. */
export async function listBackups(ctx: ActorContext, input: TListBackupsInput): Promise<TListBackupsOutput> {
  const d = await ctx.em.findOne(ManagedDatabase, scopedDatabaseFilter(ctx.actor, input.id));
  if (!d) throw databaseNotFound();
  const where: FilterQuery<DatabaseBackup> = { database: d.id };
  if (input.type) where.type = input.type;
  if (input.status) where.status = input.status;
  const page = await findPage(ctx.em, DatabaseBackup, where, input);
  return {
    success: true,
    backups: page.items.map((b) => toBackupDto(b, d)),
    total: page.total,
    page: page.page,
    limit: page.limit,
  };
}

/** A manual backup: `pending` now, `completed` after the provisioning delay; only while `running`. */
export async function createBackup(ctx: ActorContext, input: TCreateBackupInput): Promise<TBackupOutput> {
  const { actor, deps } = ctx;
  const { backup, database, wake } = await ctx.em.transactional(async (tx) => {
    const now = deps.clock.now();
    const d = await lockDatabase(tx, actor, input.id);
    if (d.status !== 'running') {
      throw conflict(`The database is ${d.status}: backups can be taken only while it is running`);
    }
    const started = await startBackup(deps, tx, d, 'manual', now, {
      name: input.name,
      description: input.description,
    });
    return { backup: started.backup, database: d, wake: started.wake };
  });
  runAll([wake]);
  return { success: true, backup: toBackupDto(backup, database) };
}
