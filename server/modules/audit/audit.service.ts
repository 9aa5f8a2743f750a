import { repositoryOf } from '../../kit/runtime.js';
import type { ActorContext } from '../../kit/deps.js';
import { validation } from '../../lib/errors.js';
import { toAuditLogDto } from './audit.dto.js';
import type { TListAuditLogsInput, TListAuditLogsOutput } from './audit.schema.js';

/** `GET /audit-logs`: the organization's entries, newest first, with the filters of the query. */
export async function listAuditLogs(
  ctx: ActorContext,
  input: TListAuditLogsInput,
): Promise<TListAuditLogsOutput> {
  const since = input.since ? new Date(input.since) : undefined;
  const until = input.until ? new Date(input.until) : undefined;
  if (since && until && until < since) throw validation('until', 'until must not be before since');
  const page = await repositoryOf(ctx.deps, 'audit').listEntries(
    ctx.em,
    {
      organizationId: ctx.actor.organizationId,
      actorId: input.actor_id,
      action: input.action,
      targetId: input.target_id,
      since,
      until,
    },
    input,
  );
  return {
    success: true,
    audit_logs: page.items.map(toAuditLogDto),
    total: page.total,
    has_more: page.has_more,
  };
}
