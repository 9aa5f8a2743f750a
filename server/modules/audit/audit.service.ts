import type { FilterQuery } from '@mikro-orm/core';
import type { ListCountSpec } from '../../db/list-counts.js';
import { AuditLog } from '../../events/audit-log.entity.js';
import { findCursorPage } from '../../db/pagination.js';
import type { ActorContext } from '../../kit/deps.js';
import { validation } from '../../lib/errors.js';
import { toAuditLogDto } from './audit.dto.js';
import type { TListAuditLogsInput, TListAuditLogsOutput } from './audit.schema.js';

/** The audit log's maintained counts (migration 30, list_counts). */
const AUDIT_COUNTS: ListCountSpec = {
  list: 'audit_logs',
  scope: 'organization',
  dims: [{ key: 'action', values: [] }],
};

/** `GET /audit-logs`: the organization's entries, newest first, with the filters of the query. */
export async function listAuditLogs(
  ctx: ActorContext,
  input: TListAuditLogsInput,
): Promise<TListAuditLogsOutput> {
  const where: FilterQuery<AuditLog> & Record<string, unknown> = { organizationId: ctx.actor.organizationId };
  if (input.actor_id) where.actorId = input.actor_id;
  if (input.action) where.action = input.action;
  if (input.target_id) where.targetId = input.target_id;
  const since = input.since ? new Date(input.since) : undefined;
  const until = input.until ? new Date(input.until) : undefined;
  if (since && until && until < since) throw validation('until', 'until must not be before since');
  if (since || until) {
    where.createdAt = { ...(since ? { $gte: since } : {}), ...(until ? { $lt: until } : {}) };
  }
  // `actor_id`, `target_id`, `since` and `until` are not counted: with them the rows are counted (docs/api-conventions.md, "Lists").
  const counted: Record<string, string> = { organization: ctx.actor.organizationId };
  if (input.action) counted.action = input.action;
  const page = await findCursorPage(ctx.em, AuditLog, where, input, {
    ...(input.actor_id || input.target_id || since || until
      ? {}
      : { counted: { spec: AUDIT_COUNTS, filter: counted } }),
  });
  return {
    success: true,
    audit_logs: page.items.map(toAuditLogDto),
    total: page.total,
    has_more: page.has_more,
  };
}
