import { AsyncLocalStorage } from 'node:async_hooks';
import type { EventSubscriber, TransactionEventArgs } from '@mikro-orm/core';
import type { Em } from '../db/orm.js';
import { newId } from '../lib/ids.js';
import type { AuditActorType } from './audit-log.entity.js';

/**
 * The audit log's writer (docs/audit-log.md, "Audit log"). Every mutation runs inside an audit scope (opened by the base
 * procedures, server/trpc/procedures.ts). The entry of a mutation that succeeds is written inside the first
 * transaction the mutation commits, by an ORM hook just before that commit: it commits with the change and
 * disappears with it on rollback. A mutation that commits nothing gets its entry when it answers; a refused one
 * (401, 402, 403, 409) gets an entry with that status. Entries carry names, ids and the status, never a body.
 */

export interface AuditActor {
  type: AuditActorType;
  id: string;
  email: string | null;
  organizationId: string;
}

export interface AuditTarget {
  type: string;
  id: string;
}

export interface AuditRequest {
  requestId: string;
  ip: string;
  userAgent: string | undefined;
}

/** What one mutation's entry will say, and whether it was written yet. */
export interface AuditScope {
  action: string;
  actor: AuditActor | undefined;
  target: AuditTarget | undefined;
  request: AuditRequest;
  /** The status the mutation answers when it succeeds (200, 201, 202). */
  successStatus: number;
  now: () => Date;
  /** Set once the entry is written. */
  entryId: string | undefined;
}

const scopes = new AsyncLocalStorage<AuditScope>();

/** Runs a mutation in its audit scope. */
export function runAudited<T>(scope: AuditScope, fn: () => Promise<T>): Promise<T> {
  return scopes.run(scope, fn);
}

/**
 * Names who acts, for mutations that learn it as they run (login, register, refresh, accepting an invitation):
 * call it before the transaction that makes the change.
 */
export function noteAuditActor(actor: AuditActor): void {
  const scope = scopes.getStore();
  if (scope && !scope.entryId) scope.actor = actor;
}

const INSERT = `insert into "audit_logs" ("id", "created_at", "organization_id", "actor_type", "actor_id",
  "actor_email", "action", "target_type", "target_id", "request_id", "ip", "user_agent", "status")
  values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

function insertParams(
  id: string,
  scope: AuditScope,
  actor: AuditActor,
  status: number,
  now: Date,
): unknown[] {
  return [
    id,
    now,
    actor.organizationId,
    actor.type,
    actor.id,
    actor.email,
    scope.action,
    scope.target?.type ?? null,
    scope.target?.id ?? null,
    scope.request.requestId,
    scope.request.ip,
    scope.request.userAgent?.slice(0, 512) ?? null,
    status,
  ];
}

/** The ORM hook that writes a mutation's entry into the transaction of its change, just before it commits. */
export function auditSubscriber(): EventSubscriber {
  return {
    async beforeTransactionCommit(args: TransactionEventArgs) {
      const scope = scopes.getStore();
      if (!scope || scope.entryId || !scope.actor) return;
      const id = newId('aud');
      await (args.em as Em).execute(
        INSERT,
        insertParams(id, scope, scope.actor, scope.successStatus, scope.now()),
        'run',
      );
      scope.entryId = id;
    },
  };
}

/** Statuses of refused mutations that are recorded (the others change nothing and name no one reliably). */
const RECORDED_REFUSALS = new Set([401, 402, 403, 409]);

/**
 * Settles a mutation's entry once it answered `status`: writes it if no transaction did (a mutation without one,
 * or a recorded refusal), or corrects the status (and fills the target of a create) of the one written.
 */
export async function settleAudit(
  em: Em,
  scope: AuditScope,
  status: number,
  target?: AuditTarget,
): Promise<void> {
  const ok = status < 400;
  if (scope.entryId) {
    if (status !== scope.successStatus || (target && !scope.target)) {
      await em.execute(
        'update "audit_logs" set "status" = ?, "target_type" = coalesce("target_type", ?), "target_id" = coalesce("target_id", ?) where "id" = ?',
        [status, target?.type ?? null, target?.id ?? null, scope.entryId],
        'run',
      );
    }
    return;
  }
  if (!scope.actor || (!ok && !RECORDED_REFUSALS.has(status))) return;
  if (target && !scope.target) scope.target = target;
  const id = newId('aud');
  await em.execute(INSERT, insertParams(id, scope, scope.actor, status, scope.now()), 'run');
  scope.entryId = id;
}

/** An entry outside any mutation's scope: a failed login (`auth.login_failed`), in the tried user's organization. */
export async function writeAuditEntry(
  em: Em,
  entry: { action: string; actor: AuditActor; request: AuditRequest; status: number; now: Date },
): Promise<void> {
  const scope: AuditScope = {
    action: entry.action,
    actor: entry.actor,
    target: undefined,
    request: entry.request,
    successStatus: entry.status,
    now: () => entry.now,
    entryId: undefined,
  };
  await em.execute(INSERT, insertParams(newId('aud'), scope, entry.actor, entry.status, entry.now), 'run');
}

/** Deletes entries older than `keepDays` (365 by default): the retention of the audit log. */
export async function purgeAuditLog(em: Em, now: Date, keepDays = 365): Promise<number> {
  const res = await em.execute(
    'delete from "audit_logs" where "created_at" < ?',
    [new Date(now.getTime() - keepDays * 86_400_000)],
    'run',
  );
  return Number((res as { affectedRows?: number }).affectedRows ?? 0);
}
