import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { BaseSchema } from '../../db/base.entity.js';
import { BACKUP_STATUSES, BACKUP_TYPES } from './databases.constants.js';
import { ManagedDatabase } from './database.entity.js';

/** A backup of a managed database: `pending` → `completed`; removed when it expires (`expiresAt`). */
export const DatabaseBackupSchema = defineEntity({
  name: 'DatabaseBackup',
  tableName: 'database_backups',
  extends: BaseSchema,
  indexes: [
    // A page for any combination of the list's filters is a range of this index (migration 30, list_counts).
    {
      name: 'database_backups_filter_index',
      expression:
        'create index "database_backups_filter_index" on "database_backups" ("database_id", "type", "status", "created_at" desc, "id" desc)',
    },
    {
      name: 'database_backups_database_index',
      expression:
        'create index "database_backups_database_index" on "database_backups" ("database_id", "created_at" desc, "id" desc)',
    },
    // The backups that expire (the sweep of databases.jobs.ts).
    {
      name: 'database_backups_expires_at_index',
      properties: ['expiresAt'],
      where: { expiresAt: { $ne: null } },
    },
  ],
  properties: {
    /**
     * Set by the code that changes the row, from the app clock (`deps.clock`), rather than by the base entity's
     * `onUpdate` hook: bookkeeping (the backup schedule, `last_backup`) does not move it.
     */
    updatedAt: p.datetime(3).columnType('timestamptz(3)'),
    organization: () => p.manyToOne(Organization).deleteRule('cascade').index(),
    database: () => p.manyToOne(ManagedDatabase).deleteRule('cascade'),
    type: p.enum(BACKUP_TYPES),
    status: p.enum(BACKUP_STATUSES).default('pending'),
    name: p.string().length(100),
    description: p.string().length(500).nullable(),
    /** Why the backup is `failed` (the dump's error, without secrets). */
    failureReason: p.string().length(500).nullable(),
    /** Bytes, known once completed. */
    sizeBytes: p.bigint('number').nullable(),
    completedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** Automatic backups: `backup_retention` days after creation; final backups: 7 days after removal. */
    expiresAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});

export class DatabaseBackup extends DatabaseBackupSchema.class {}
DatabaseBackupSchema.setClass(DatabaseBackup);
