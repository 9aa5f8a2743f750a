import { defineEntity, p } from '@mikro-orm/core';

export const AUDIT_ACTOR_TYPES = ['user', 'api_key'] as const;
export type AuditActorType = (typeof AUDIT_ACTOR_TYPES)[number];

/**
 * One entry of the audit log (docs/audit-log.md, "Audit log"): who did what to which target, from where, and the status
 * answered. Written in the transaction of the change it records (server/events/audit.ts); never holds a request
 * body, so no password, token, secret or card data can reach it. No foreign keys: entries outlive what they name.
 */
export const AuditLogSchema = defineEntity({
  name: 'AuditLog',
  tableName: 'audit_logs',
  properties: {
    id: p.string().primary().length(64),
    createdAt: p.datetime(3).columnType('timestamptz(3)'),
    organizationId: p.string().length(64),
    actorType: p.enum(AUDIT_ACTOR_TYPES),
    actorId: p.string().length(64),
    actorEmail: p.string().length(320).nullable(),
    action: p.string().length(128),
    targetType: p.string().length(64).nullable(),
    targetId: p.string().length(64).nullable(),
    requestId: p.string().length(128).nullable(),
    ip: p.string().length(64).nullable(),
    userAgent: p.string().length(512).nullable(),
    status: p.integer(),
  },
  indexes: [
    { properties: ['organizationId', 'createdAt', 'id'], name: 'audit_logs_organization_list_index' },
    { properties: ['organizationId', 'actorId'], name: 'audit_logs_organization_actor_index' },
    { properties: ['organizationId', 'targetId'], name: 'audit_logs_organization_target_index' },
    { properties: ['createdAt'], name: 'audit_logs_created_at_index' },
  ],
});
export class AuditLog extends AuditLogSchema.class {}
AuditLogSchema.setClass(AuditLog);
