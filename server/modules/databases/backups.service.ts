import type { FilterQuery } from '@mikro-orm/core';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import type { ListCountSpec } from '../../db/list-counts.js';
import { findPage } from '../../db/pagination.js';
import type { ActorContext } from '../../kit/deps.js';
import { conflict } from '../../lib/errors.js';
import { BACKUP_STATUSES, BACKUP_TYPES } from './databases.constants.js';
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

/** A database's backup list's maintained counts (migration 30, list_counts). */
const BACKUP_COUNTS: ListCountSpec = {
  list: 'database_backups',
  scope: 'database',
  dims: [
    { key: 'type', values: BACKUP_TYPES },
    { key: 'status', values: BACKUP_STATUSES },
  ],
};

/** The backups of one database, newest first (a page list); filters `type` and `status`. */
export async function listBackups(ctx: ActorContext, input: TListBackupsInput): Promise<TListBackupsOutput> {
  const d = await ctx.em.findOne(ManagedDatabase, scopedDatabaseFilter(ctx.actor, input.id));
  if (!d) throw databaseNotFound();
  const filter: Record<string, string> = { database: d.id };
  if (input.type) filter.type = input.type;
  if (input.status) filter.status = input.status;
  const request = pageRequest(input);
  const page = await findPage(ctx.em, DatabaseBackup, filter as FilterQuery<DatabaseBackup>, request, {
    counted: { spec: BACKUP_COUNTS, filter },
  });
  return {
    success: true,
    backups: page.items.map((b) => toBackupDto(b, d)),
    ...pageFields(request, page),
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
