import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { DATABASE_SIZES } from './databases.constants.js';
import { ManagedDatabase } from './database.entity.js';

/**
 * The billable time of databases, one row per stretch at one size: opened when a database is created or its
 * deletion canceled, closed (and a new one opened) when its size changes, closed when its deletion is initiated.
 * Usage reports and invoices add these up (databases.usage.ts).
 */
export const DatabaseUsagePeriodSchema = defineEntity({
  name: 'DatabaseUsagePeriod',
  tableName: 'database_usage_periods',
  indexes: [
    { name: 'database_usage_periods_organization_index', properties: ['organization', 'startedAt'] },
    { name: 'database_usage_periods_open_index', properties: ['database'], where: { endedAt: null } },
  ],
  properties: {
    id: p.integer().primary().autoincrement(),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    database: () => p.manyToOne(ManagedDatabase).deleteRule('cascade'),
    size: p.enum(DATABASE_SIZES),
    startedAt: p.datetime(3).columnType('timestamptz(3)'),
    endedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});

export class DatabaseUsagePeriod extends DatabaseUsagePeriodSchema.class {}
DatabaseUsagePeriodSchema.setClass(DatabaseUsagePeriod);
