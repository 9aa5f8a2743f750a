import { router } from '../../trpc/init.js';
import { requirePermission } from '../../trpc/procedures.js';
import * as backups from './backups.service.js';
import {
  ZBackupOutput,
  ZCreateBackupInput,
  ZCreateDatabaseInput,
  ZDatabaseActionInput,
  ZDatabaseIdInput,
  ZDatabaseOutput,
  ZDeleteDatabaseOutput,
  ZListBackupsInput,
  ZListBackupsOutput,
  ZListDatabasesInput,
  ZListDatabasesOutput,
  ZResetPasswordOutput,
  ZUpdateDatabaseInput,
} from './databases.schema.js';
import * as databases from './databases.service.js';

const tags = ['Databases'];

const backupsRouter = router({
  list: requirePermission('database:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/databases/{id}/backups',
        tags,
        summary: 'List the backups of a database',
        description: 'Newest first, paged (`page`, `limit`); filters `type` and `status`.',
      },
    })
    .input(ZListBackupsInput)
    .output(ZListBackupsOutput)
    .query(({ ctx, input }) => backups.listBackups(ctx, input)),

  create: requirePermission('database:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/databases/{id}/backups',
        tags,
        summary: 'Take a manual backup',
        description:
          'Accepted: the backup is `pending`, then `completed` after the provisioning delay (emitting ' +
          '`database.backup.completed`). Manual backups do not expire. Only while the database is `running`. ' +
          "The organization's backups are limited per plan (starter: 10 manual backups and 100 GB of backups, " +
          'pro: 50 and 1,000 GB, enterprise: 200 and 10,000 GB); beyond either: 402 `PLAN_LIMIT_EXCEEDED`, ' +
          '`details` naming `manual_backups` or `backup_storage_bytes` with the limit and the current figure.',
      },
      errors: {
        CONFLICT: 'The database is not `running`',
        PLAN_LIMIT_EXCEEDED: "The organization's backups hold its plan's manual backups or bytes",
      },
      successStatus: 202,
    })
    .input(ZCreateBackupInput)
    .output(ZBackupOutput)
    .mutation(({ ctx, input }) => backups.createBackup(ctx, input)),
});

export const databasesRouter = router({
  list: requirePermission('database:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/databases',
        tags,
        summary: 'List databases',
        description:
          'Newest first, paged. Owners and admins see every database of the organization (or one owner’s with ' +
          '`user_id`), members their own. Filters `engine`, `status`, `region`. Passwords show as `****`.',
      },
    })
    .input(ZListDatabasesInput)
    .output(ZListDatabasesOutput)
    .query(({ ctx, input }) => databases.listDatabases(ctx, input)),

  create: requirePermission('database:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/databases',
        tags,
        summary: 'Create a database',
        description:
          'The database starts `creating` and becomes `running` after the provisioning delay (simulated) or once ' +
          'a real server has created it (`DATABASE_HOSTS`: docs/databases.md, "Databases", Real servers). This response ' +
          'alone carries the generated password (`connection_info.password`, and in clear in ' +
          '`connection_string`): it is stored as a hash only. With `backup_id`, the database starts from that ' +
          'completed backup (a real one restores its dump). Beyond the plan limit: 402 `PLAN_LIMIT_EXCEEDED`. ' +
          'With `DATABASE_HOSTS` set, an engine or region that has no server taking new databases (MongoDB ' +
          'always) is refused with 409 `UNSUPPORTED_PLACEMENT`; when no server of that engine and region has ' +
          'connections left for the size (the connection limits of the databases on a server never exceed its ' +
          '`max_connections` less a reserve: docs/databases.md, "Capacity of a server"), with 503 ' +
          '`NO_SERVER_CAPACITY`.',
      },
      errors: {
        PLAN_LIMIT_EXCEEDED: 'The plan allows no more databases; details name `{resource, limit, current}`',
        CONFLICT: 'The name is taken, or the backup is not completed, of another engine or simulated',
        UNSUPPORTED_PLACEMENT: 'No server of that engine and region takes new databases (DATABASE_HOSTS)',
        NO_SERVER_CAPACITY: 'No server of that engine and region has connections left for the size',
      },
      successStatus: 201,
      location: '/databases/{database.id}',
    })
    .input(ZCreateDatabaseInput)
    .output(ZDatabaseOutput)
    .mutation(({ ctx, input }) => databases.createDatabase(ctx, input)),

  get: requirePermission('database:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/databases/{id}',
        tags,
        summary: 'A database (detail view)',
        description: 'Connection details (password masked), simulated metrics, size constants.',
      },
    })
    .input(ZDatabaseIdInput)
    .output(ZDatabaseOutput)
    .query(({ ctx, input }) => databases.getDatabase(ctx, input)),

  update: requirePermission('database:write')
    .meta({
      openapi: {
        method: 'PUT',
        path: '/databases/{id}',
        tags,
        summary: 'Resize a database or change its backups',
        description:
          'Only while `running`. A new `size` makes the database `resizing` for the provisioning delay. Emits ' +
          '`database.updated` when something changed. A real database grows only into connections its server ' +
          'has left (503 `NO_SERVER_CAPACITY`).',
      },
      errors: {
        CONFLICT: 'The database is not `running`',
        NO_SERVER_CAPACITY: 'Its server has no connections left for the larger size',
      },
    })
    .input(ZUpdateDatabaseInput)
    .output(ZDatabaseOutput)
    .mutation(({ ctx, input }) => databases.updateDatabase(ctx, input)),

  delete: requirePermission('database:delete')
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/databases/{id}',
        tags,
        summary: 'Delete a database (after a grace period)',
        description:
          'Accepted: the database becomes `deleting`, a `final` backup is taken now, and the database is removed ' +
          'at `deletion_scheduled` (DATABASE_DELETION_GRACE, 24 h by default) unless the deletion is canceled. ' +
          'The final backup can be restored (`backup_id` of a create) until 7 days after the removal. Emits ' +
          '`database.deleted`.',
      },
      errors: { CONFLICT: 'The database is already being deleted' },
      successStatus: 202,
    })
    .input(ZDatabaseIdInput)
    .output(ZDeleteDatabaseOutput)
    .mutation(({ ctx, input }) => databases.deleteDatabase(ctx, input)),

  resetPassword: requirePermission('database:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/databases/{id}/reset-password',
        tags,
        summary: 'Generate a new password',
        description:
          'The old password stops working. The new one is in this response only (`password`, ' +
          '`database.connection_info.password` and `database.connection_string`). Emits `database.updated`.',
      },
      errors: {
        CONFLICT: 'The database is being deleted, or (a real one) not yet running',
        SERVICE_UNAVAILABLE: 'The database server did not answer; the password is unchanged',
      },
    })
    .input(ZDatabaseActionInput)
    .output(ZResetPasswordOutput)
    .mutation(({ ctx, input }) => databases.resetPassword(ctx, input)),

  cancelDeletion: requirePermission('database:delete')
    .meta({
      openapi: {
        method: 'POST',
        path: '/databases/{id}/cancel-deletion',
        tags,
        summary: 'Cancel the deletion of a database',
        description:
          'A `deleting` database becomes `running` again and counts against the plan again (402 when the plan ' +
          'has no room for it). Its final backup is kept, without expiry. Emits `database.updated`.',
      },
      errors: {
        PLAN_LIMIT_EXCEEDED: 'The plan has no room for the database any more',
        CONFLICT: 'The database is not being deleted',
      },
    })
    .input(ZDatabaseActionInput)
    .output(ZDatabaseOutput)
    .mutation(({ ctx, input }) => databases.cancelDeletion(ctx, input)),

  backups: backupsRouter,
});
