import { z } from 'zod';
import { pageQueryShape, pageResponse } from '../../lib/pagination.js';
import { okResponse, zPathId, zUserIdFilter } from '../../lib/schema.js';
import {
  BACKUP_STATUSES,
  BACKUP_TYPES,
  DATABASE_ENGINES,
  DATABASE_NAME_MAX_LENGTH,
  DATABASE_NAME_PATTERN,
  DATABASE_REGIONS,
  DATABASE_SIZES,
  DATABASE_STATUSES,
  DATABASE_VERSIONS,
  DEFAULT_BACKUP_RETENTION_DAYS,
  DEFAULT_VERSIONS,
  ENGINE_VERSIONS,
  isVersionOf,
  MAX_BACKUP_RETENTION_DAYS,
  MIN_BACKUP_RETENTION_DAYS,
} from './databases.constants.js';

const versionsText = (Object.keys(ENGINE_VERSIONS) as (keyof typeof ENGINE_VERSIONS)[])
  .map((e) => `${e} ${ENGINE_VERSIONS[e].join(', ')} (default ${DEFAULT_VERSIONS[e]})`)
  .join('; ');

// ---------- inputs ----------

const ZDatabaseId = zPathId('db', 'Database');

export const ZDatabaseIdInput = z.object({ id: ZDatabaseId });
export type TDatabaseIdInput = z.infer<typeof ZDatabaseIdInput>;

/** Actions on one database with an empty body (reset-password, cancel-deletion). */
export const ZDatabaseActionInput = z.strictObject({ id: ZDatabaseId });
export type TDatabaseActionInput = z.infer<typeof ZDatabaseActionInput>;

export const ZListDatabasesInput = z
  .object({
    ...pageQueryShape,
    engine: z.enum(DATABASE_ENGINES).optional().describe('Only databases of this engine'),
    status: z.enum(DATABASE_STATUSES).optional().describe('Only databases in this state'),
    region: z.enum(DATABASE_REGIONS).optional().describe('Only databases in this region'),
    user_id: zUserIdFilter(
      'Only the databases of this owner (`usr_…`). Members see their own databases only, whatever they pass.',
    ),
  })
  .prefault({});
export type TListDatabasesInput = z.infer<typeof ZListDatabasesInput>;

const ZBackupRetention = z
  .number()
  .int()
  .min(MIN_BACKUP_RETENTION_DAYS)
  .max(MAX_BACKUP_RETENTION_DAYS)
  .describe(
    `Days an automatic backup is kept, ${MIN_BACKUP_RETENTION_DAYS} to ${MAX_BACKUP_RETENTION_DAYS} ` +
      `(default ${DEFAULT_BACKUP_RETENTION_DAYS})`,
  );

const NAME_RULE = `Must be 1 to ${DATABASE_NAME_MAX_LENGTH} lowercase letters, digits and hyphens, starting with a letter`;

export const ZCreateDatabaseInput = z
  .strictObject({
    name: z
      .string()
      .max(DATABASE_NAME_MAX_LENGTH, NAME_RULE)
      .regex(DATABASE_NAME_PATTERN, NAME_RULE)
      .describe(
        '1 to 63 lowercase letters, digits and `-`, starting with a letter; unique in the organization among ' +
          'databases not yet removed',
      ),
    engine: z.enum(DATABASE_ENGINES).describe('`postgresql`, `mysql` or `mongodb`'),
    version: z
      .enum(DATABASE_VERSIONS)
      .optional()
      .describe(
        `A version of the engine: ${versionsText}. With \`backup_id\`: the backup's version by default, and not ` +
          'older than it.',
      ),
    size: z
      .enum(DATABASE_SIZES)
      .optional()
      .describe(
        'small (1 vCPU, 2 GB, 20 GB SSD, $29/month), medium (2 vCPU, 4 GB, 100 GB, $89), large (4 vCPU, 8 GB, ' +
          '500 GB, $199) or xl (8 vCPU, 16 GB, 1 TB, $499). Default `small`; with `backup_id`, the size of the ' +
          'backed-up database.',
      ),
    region: z
      .enum(DATABASE_REGIONS)
      .optional()
      .describe('Default `us-east`; with `backup_id`, the region of the backed-up database'),
    backup_enabled: z
      .boolean()
      .optional()
      .describe('Take an automatic backup every backup interval (default true)'),
    multi_az: z.boolean().optional().describe('A standby in a second availability zone (default false)'),
    backup_retention: ZBackupRetention.optional(),
    backup_id: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe(
        'Create the database from this `completed` backup (`backup_…`) of the organization, of the same engine. ' +
          'A final backup stays available for 7 days after its database was removed.',
      ),
  })
  .superRefine((v, ctx) => {
    if (v.version !== undefined && !isVersionOf(v.engine, v.version)) {
      ctx.addIssue({
        code: 'custom',
        path: ['version'],
        message: `${v.engine} versions are ${ENGINE_VERSIONS[v.engine].join(', ')}`,
      });
    }
  });
export type TCreateDatabaseInput = z.infer<typeof ZCreateDatabaseInput>;

export const ZUpdateDatabaseInput = z.strictObject({
  id: ZDatabaseId,
  size: z
    .enum(DATABASE_SIZES)
    .optional()
    .describe('A new size: the database is `resizing` for the provisioning delay, then `running` again'),
  backup_enabled: z.boolean().optional().describe('Turn automatic backups on or off'),
  backup_retention: ZBackupRetention.optional(),
});
export type TUpdateDatabaseInput = z.infer<typeof ZUpdateDatabaseInput>;

export const ZListBackupsInput = z.object({
  id: ZDatabaseId,
  ...pageQueryShape,
  type: z.enum(BACKUP_TYPES).optional().describe('Only backups of this type'),
  status: z.enum(BACKUP_STATUSES).optional().describe('Only backups in this state'),
});
export type TListBackupsInput = z.infer<typeof ZListBackupsInput>;

export const ZCreateBackupInput = z.strictObject({
  id: ZDatabaseId,
  name: z
    .string()
    .trim()
    .min(1)
    .max(100)
    .optional()
    .describe('1 to 100 characters (default `<database>-manual-<yyyymmdd-hhmmss>`)'),
  description: z.string().max(500).optional().describe('At most 500 characters'),
});
export type TCreateBackupInput = z.infer<typeof ZCreateBackupInput>;

// ---------- outputs ----------

const ZTimestamp = z.string().describe('ISO 8601 UTC with milliseconds');
const ZNullableTimestamp = z.string().nullable().describe('ISO 8601 UTC with milliseconds, or null');
const ZPercent = z.number().int().min(0).max(100);

export const ZDatabaseMetrics = z
  .object({
    cpu_usage: ZPercent.describe('Percent of the vCPUs in use'),
    memory_usage: ZPercent.describe('Percent of the memory in use'),
    storage_usage: ZPercent.describe('Percent of the storage in use'),
  })
  .describe(
    'Load, simulated or read from a real server (docs/databases.md, "Databases"); all 0 unless `running` or `resizing`',
  )
  .meta({ id: 'DatabaseMetrics' });

export const ZDatabaseDetailMetrics = z
  .object({
    ...ZDatabaseMetrics.shape,
    connections: z.object({
      active: z.number().int().describe('Open client connections'),
      max: z.number().int().describe('Connection limit of the size: 50, 100, 200 or 400'),
    }),
  })
  .describe(
    'Load, simulated or read from a real server (docs/databases.md, "Databases"); all 0 unless `running` or `resizing`',
  )
  .meta({ id: 'DatabaseDetailMetrics' });

const databaseFields = {
  id: z.string().describe('`db_…`'),
  name: z.string(),
  engine: z.enum(DATABASE_ENGINES),
  version: z.enum(DATABASE_VERSIONS),
  status: z
    .enum(DATABASE_STATUSES)
    .describe(
      '`creating` → `running`; `resizing` while a new size is applied; `deleting` until removed; `failed` when ' +
        'a real server could not create it after retries (`status_reason`; it can only be deleted)',
    ),
  region: z.enum(DATABASE_REGIONS),
  size: z.enum(DATABASE_SIZES),
  storage: z.string().describe('SSD storage of the size: `20 GB`, `100 GB`, `500 GB` or `1 TB`'),
  connection_string: z
    .string()
    .describe(
      'URL in the engine’s scheme (`postgresql://`, `mysql://`, `mongodb://`). The password shows in clear in ' +
        'the create and reset-password responses only; `****` everywhere else.',
    ),
  metrics: ZDatabaseMetrics,
  backup_enabled: z.boolean(),
  multi_az: z.boolean(),
  backup_retention: z.number().int().describe('Days an automatic backup is kept'),
  user_id: z.string().describe('Owner of the database, `usr_…`'),
  created_at: ZTimestamp,
  updated_at: ZTimestamp,
  last_backup: ZNullableTimestamp.describe(
    'When the newest completed backup finished; null before the first',
  ),
  next_backup: ZNullableTimestamp.describe(
    'When the next automatic backup is due; null while automatic backups are off or the database is deleting',
  ),
  deletion_scheduled: ZNullableTimestamp.describe(
    'While `deleting`: when the database will be removed; null otherwise',
  ),
};

export const ZDatabase = z.object(databaseFields).meta({ id: 'Database' });
export type TDatabase = z.infer<typeof ZDatabase>;

export const ZConnectionInfo = z
  .object({
    host: z.string().describe('The real server’s host; simulated: `<name>-<random>.<region>.db.example.com`'),
    port: z
      .number()
      .int()
      .describe('The real server’s port; simulated: 5432 (PostgreSQL), 3306 (MySQL) or 27017 (MongoDB)'),
    database: z.string(),
    user: z.string(),
    password: z
      .string()
      .optional()
      .describe('Only in the create and reset-password responses; stored as a hash, never shown again'),
    ssl_required: z
      .boolean()
      .describe('Whether connections must use TLS: always for simulated ones; a real server’s own setting'),
    simulated: z
      .boolean()
      .describe(
        'True when no real server holds the database (no `DATABASE_HOSTS`): nothing can connect to it. False: ' +
          'a real database on a server of `DATABASE_HOSTS`',
      ),
  })
  .meta({ id: 'DatabaseConnectionInfo' });

export const ZDatabaseDetail = z
  .object({
    ...databaseFields,
    metrics: ZDatabaseDetailMetrics,
    connection_info: ZConnectionInfo,
    specs: z
      .object({
        vcpus: z.number().int(),
        memory: z.string().describe('`2 GB` to `16 GB`'),
        storage: z.string(),
        monthly_price: z.number().describe('USD per month'),
      })
      .describe('The constants of the size'),
    restored_from_backup_id: z
      .string()
      .nullable()
      .describe('The backup this database was created from (`backup_…`), or null'),
    read_only: z
      .boolean()
      .describe('True while a real database is over its storage: writes are refused until it is back under'),
    status_reason: z
      .string()
      .nullable()
      .describe('Why the database is `failed` (the server’s error, without credentials); null otherwise'),
  })
  .meta({ id: 'DatabaseDetail' });
export type TDatabaseDetail = z.infer<typeof ZDatabaseDetail>;

export const ZListDatabasesOutput = pageResponse('databases', ZDatabase);
export type TListDatabasesOutput = z.infer<typeof ZListDatabasesOutput>;

export const ZDatabaseOutput = okResponse({ database: ZDatabaseDetail });
export type TDatabaseOutput = z.infer<typeof ZDatabaseOutput>;

export const ZResetPasswordOutput = okResponse({
  database: ZDatabaseDetail,
  password: z.string().describe('The new password (also in `database.connection_info`), shown this once'),
});
export type TResetPasswordOutput = z.infer<typeof ZResetPasswordOutput>;

export const ZDeleteDatabaseOutput = okResponse({
  message: z.string(),
  id: z.string().describe('The database being deleted'),
  final_backup: z
    .string()
    .describe(
      'Id of the final backup taken now (`backup_…`): usable as `backup_id` until 7 days after removal',
    ),
  deletion_scheduled: ZTimestamp.describe('When the database will be removed'),
});
export type TDeleteDatabaseOutput = z.infer<typeof ZDeleteDatabaseOutput>;

export const ZBackup = z
  .object({
    id: z.string().describe('`backup_…`'),
    database_id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    type: z
      .enum(BACKUP_TYPES)
      .describe('`automatic` (scheduled), `manual` (POST), `final` (taken when deletion starts)'),
    status: z
      .enum(BACKUP_STATUSES)
      .describe('`pending` → `completed`, or `failed` when the dump did not succeed after retries'),
    failure_reason: z
      .string()
      .nullable()
      .describe('Why the backup `failed` (the dump’s error, without credentials); null otherwise'),
    size: z.string().nullable().describe('Human readable (`1.2 GB`); null until completed'),
    size_bytes: z.number().int().nullable().describe('The same in bytes; null until completed'),
    engine: z.enum(DATABASE_ENGINES).describe('Engine of the backed-up database'),
    version: z.enum(DATABASE_VERSIONS).describe('Version of the backed-up database'),
    created_at: ZTimestamp,
    completed_at: ZNullableTimestamp,
    expires_at: ZNullableTimestamp.describe(
      'When the backup is removed: automatic backups `backup_retention` days after creation, final backups 7 ' +
        'days after the database is removed; null for manual backups',
    ),
  })
  .meta({ id: 'DatabaseBackup' });
export type TBackup = z.infer<typeof ZBackup>;

export const ZBackupOutput = okResponse({ backup: ZBackup });
export type TBackupOutput = z.infer<typeof ZBackupOutput>;

export const ZListBackupsOutput = pageResponse('backups', ZBackup);
export type TListBackupsOutput = z.infer<typeof ZListBackupsOutput>;
