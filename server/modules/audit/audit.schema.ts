import { z } from 'zod';
import { AUDIT_ACTOR_TYPES } from '../../events/audit-log.entity.js';
import { cursorQueryShape, cursorResponse } from '../../lib/pagination.js';

const ZTimestampFilter = (what: string) =>
  z.iso
    .datetime({ offset: true, message: 'Must be an ISO 8601 date-time, e.g. 2026-11-21T08:36:00.000Z' })
    .optional()
    .describe(what);

export const ZListAuditLogsInput = z.object({
  ...cursorQueryShape,
  actor_id: z.string().max(64).optional().describe('Only entries of this actor (`usr_…` or `key_…`)'),
  action: z
    .string()
    .max(128)
    .optional()
    .describe(
      'Only entries of this action: the procedure’s path, e.g. `vpn.connections.create`, or `auth.login_failed`',
    ),
  target_id: z.string().max(64).optional().describe('Only entries about this resource'),
  since: ZTimestampFilter('Only entries at or after this time'),
  until: ZTimestampFilter('Only entries before this time'),
});
export type TListAuditLogsInput = z.infer<typeof ZListAuditLogsInput>;

export const ZAuditLogEntry = z
  .object({
    id: z.string().describe('`aud_…`'),
    created_at: z.string(),
    actor: z.object({
      type: z.enum(AUDIT_ACTOR_TYPES),
      id: z.string().describe('`usr_…` or `key_…`'),
      email: z.string().nullable().describe('The user’s email (for a key: its creator’s), when known'),
    }),
    action: z
      .string()
      .describe('The procedure’s path in the router (`vpn.connections.create`), or `auth.login_failed`'),
    target: z
      .object({ type: z.string().describe('`vpn_connection`, `user`, `webhook`, …'), id: z.string() })
      .nullable(),
    request_id: z.string().nullable(),
    ip: z.string().nullable(),
    user_agent: z.string().nullable(),
    status: z.number().int().describe('The HTTP status answered'),
  })
  .meta({ id: 'AuditLogEntry' });
export type TAuditLogEntry = z.infer<typeof ZAuditLogEntry>;

export const ZListAuditLogsOutput = cursorResponse('audit_logs', ZAuditLogEntry);
export type TListAuditLogsOutput = z.infer<typeof ZListAuditLogsOutput>;
