import type { AuditLog } from '../../events/audit-log.entity.js';
import { iso } from '../../lib/time.js';
import type { TAuditLogEntry } from './audit.schema.js';

export function toAuditLogDto(e: AuditLog): TAuditLogEntry {
  return {
    id: e.id,
    created_at: iso(e.createdAt)!,
    actor: { type: e.actorType, id: e.actorId, email: e.actorEmail ?? null },
    action: e.action,
    target: e.targetType && e.targetId ? { type: e.targetType, id: e.targetId } : null,
    request_id: e.requestId ?? null,
    ip: e.ip ?? null,
    user_agent: e.userAgent ?? null,
    status: e.status,
  };
}
