import type { FilterQuery } from '@mikro-orm/core';
import type { ListCountSpec } from '../../db/list-counts.js';
import type { Database, Em } from '../../db/orm.js';
import { findCursorPage, type CursorPaged } from '../../db/pagination.js';
import { AuditLog, AuditLogSchema } from '../../events/audit-log.entity.js';
import { purgeAuditLog } from '../../events/audit.js';

/**
 * Every read of the audit log by the audit module (docs/adding-a-module.md, "Checklist", step 3): its service and job
 * go through an {@link AuditRepository}, never through the ORM or SQL themselves. The process gets the MikroORM one
 * ({@link MikroOrmAuditRepository}) from the module's `create` (`repositoryOf(deps, 'audit')`). The table and its
 * entity belong to the core, which writes the entries (server/events/audit.ts).
 */

/** The table the module reads, from its entity. */
export const AUDIT_TABLES = {
  auditLogs: AuditLogSchema.tableName,
} as const;

/** An audit log list's filter, already scoped to the caller's organization. */
export interface AuditLogFilter {
  organizationId: string;
  actorId?: string | undefined;
  action?: string | undefined;
  targetId?: string | undefined;
  /** Entries at or after. */
  since?: Date | undefined;
  /** Entries before. */
  until?: Date | undefined;
}

export interface AuditRepository {
  /** The organization's entries matching `filter`, newest first. */
  listEntries(
    em: Em,
    filter: AuditLogFilter,
    page: { limit: number; starting_after?: string | undefined },
  ): Promise<CursorPaged<AuditLog>>;
  /** Deletes the entries older than the retention at `now`; how many. */
  purgeExpired(now: Date): Promise<number>;
}

/** The audit log's maintained counts (migration 30, list_counts). */
const AUDIT_COUNTS: ListCountSpec = {
  list: AUDIT_TABLES.auditLogs,
  scope: 'organization',
  dims: [{ key: 'action', values: [] }],
};

export class MikroOrmAuditRepository implements AuditRepository {
  constructor(private readonly db: Database) {}

  listEntries(
    em: Em,
    filter: AuditLogFilter,
    page: { limit: number; starting_after?: string | undefined },
  ): Promise<CursorPaged<AuditLog>> {
    const { since, until } = filter;
    const where: FilterQuery<AuditLog> & Record<string, unknown> = { organizationId: filter.organizationId };
    if (filter.actorId) where.actorId = filter.actorId;
    if (filter.action) where.action = filter.action;
    if (filter.targetId) where.targetId = filter.targetId;
    if (since || until) {
      where.createdAt = { ...(since ? { $gte: since } : {}), ...(until ? { $lt: until } : {}) };
    }
    // `actor_id`, `target_id`, `since` and `until` are not counted: with them the rows are counted (docs/api-conventions.md, "Lists").
    const counted: Record<string, string> = { organization: filter.organizationId };
    if (filter.action) counted.action = filter.action;
    return findCursorPage(em, AuditLog, where, page, {
      ...(filter.actorId || filter.targetId || since || until
        ? {}
        : { counted: { spec: AUDIT_COUNTS, filter: counted } }),
    });
  }

  purgeExpired(now: Date): Promise<number> {
    return purgeAuditLog(this.db.orm.em.fork(), now);
  }
}
