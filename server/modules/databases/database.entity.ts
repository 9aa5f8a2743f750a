import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { User } from '../../access/user.entity.js';
import { BaseSchema } from '../../db/base.entity.js';
import {
  DATABASE_ENGINES,
  DATABASE_SIZES,
  DATABASE_STATUSES,
  type DatabaseRegion,
} from './databases.constants.js';

/**
 * A managed database. Removal (at `deletion_scheduled`) keeps the row with `removedAt` set: usage and billing read
 * the time it existed, and its final backup points at it. Such a row is never shown again (404).
 */
export const ManagedDatabaseSchema = defineEntity({
  name: 'ManagedDatabase',
  tableName: 'databases',
  extends: BaseSchema,
  indexes: [
    // A page for any combination of the list's filters is a range of this index (migration 30, list_counts).
    {
      name: 'databases_filter_index',
      expression:
        'create index "databases_filter_index" on "databases" ("organization_id", "engine", "status", "region", "created_at" desc, "id" desc) where "removed_at" is null',
    },
    {
      name: 'databases_owner_filter_index',
      expression:
        'create index "databases_owner_filter_index" on "databases" ("organization_id", "user_id", "engine", "status", "region", "created_at" desc, "id" desc) where "removed_at" is null',
    },
    // The organization's and a user's databases, newest first. Written as SQL: the ORM reads a descending `id`
    // after a column named `…_id` back as ascending, so it compares such an index by name only.
    {
      name: 'databases_organization_index',
      expression:
        'create index "databases_organization_index" on "databases" ("organization_id", "created_at" desc, "id" desc) where "removed_at" is null',
    },
    {
      name: 'databases_owner_index',
      expression:
        'create index "databases_owner_index" on "databases" ("organization_id", "user_id", "created_at" desc, "id" desc) where "removed_at" is null',
    },
    // The deletions due (the sweep of databases.jobs.ts).
    {
      name: 'databases_deletion_scheduled_at_index',
      properties: ['deletionScheduledAt'],
      where: { status: 'deleting', removedAt: null },
    },
  ],
  uniques: [
    // A name is taken until its database is removed.
    {
      name: 'databases_organization_id_name_unique',
      properties: ['organization', 'name'],
      where: { removedAt: null },
    },
  ],
  properties: {
    /**
     * Set by the code that changes the row, from the app clock (`deps.clock`), rather than by the base entity's
     * `onUpdate` hook: bookkeeping (the backup schedule, `last_backup`) does not move it.
     */
    updatedAt: p.datetime(3).columnType('timestamptz(3)'),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    /** The owner: the user who created it (or received it when that user was deleted). */
    user: () => p.manyToOne(User).index(),
    name: p.string().length(63),
    engine: p.enum(DATABASE_ENGINES),
    version: p.string().length(8),
    size: p.enum(DATABASE_SIZES),
    /** One of DATABASE_REGIONS; a plain string column (no check constraint), validated by the API. */
    region: p.string().length(32).$type<DatabaseRegion>(),
    status: p.enum(DATABASE_STATUSES).default('creating'),
    backupEnabled: p.boolean().default(true),
    multiAz: p.boolean().default(false),
    /** Days an automatic backup is kept. */
    backupRetention: p.integer().default(7).check('"backup_retention" >= 1 and "backup_retention" <= 35'),
    host: p.string().length(253),
    /** The port clients connect to; null: the engine's (simulated databases). */
    port: p.integer().nullable(),
    /** The server it lives on (`<engine>@<region>/<host>:<port>` of DATABASE_HOSTS); null: simulated. */
    server: p.string().length(200).nullable(),
    /** Whether clients must use TLS (`connection_info.ssl_required`). */
    sslRequired: p.boolean().default(true),
    /** Over its storage: made read-only until back under (docs/databases.md, "Databases", Real servers). */
    readOnly: p.boolean().default(false),
    /** Why the database is `failed` (its creation did not succeed after retries); no secret. */
    statusReason: p.string().length(500).nullable(),
    dbName: p.string().length(63),
    dbUser: p.string().length(63),
    /** SHA-256 (hex) of the generated password; the password itself is never stored. */
    passwordHash: p.string().length(64).hidden().lazy(),
    /**
     * Bumped by every change of status: a job acts only on the transition (generation) it was queued for, so a
     * late or repeated job cannot undo a later change.
     */
    generation: p.integer().default(1),
    /** Bumped when the automatic backup schedule starts, stops or moves on (see databases.jobs.ts). */
    backupSchedule: p.integer().default(0),
    /** When the next automatic backup is due; null while automatic backups are off or paused. */
    nextBackupAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    lastBackupAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    deletionScheduledAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    removedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** The backup this database was created from, if any (kept after the backup expires). */
    restoredFromBackupId: p.string().length(64).nullable(),
  },
});

export class ManagedDatabase extends ManagedDatabaseSchema.class {}
ManagedDatabaseSchema.setClass(ManagedDatabase);
