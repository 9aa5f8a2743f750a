import { pageFields, pageRequest } from '../../lib/pagination.js';
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
import { findDatabase, lockDatabase, storeOf } from './databases.service.js';

/** The backups of one database, newest first (a page list); filters `type` and `status`. */
export async function listBackups(ctx: ActorContext, input: TListBackupsInput): Promise<TListBackupsOutput> {
  const store = storeOf(ctx);
  const d = await findDatabase(store, ctx.actor, input.id);
  const request = pageRequest(input);
  const page = await store.backupPage(d.id, { type: input.type, status: input.status }, request);
  return {
    success: true,
    backups: page.items.map((b) => toBackupDto(b, d)),
    ...pageFields(request, page),
  };
}

/** A manual backup: `pending` now, `completed` after the provisioning delay; only while `running`. */
export async function createBackup(ctx: ActorContext, input: TCreateBackupInput): Promise<TBackupOutput> {
  const { actor, deps } = ctx;
  const { backup, database, wake } = await storeOf(ctx).transaction(async (tx) => {
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
