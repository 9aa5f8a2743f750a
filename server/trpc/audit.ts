import type { Actor } from '../access/actor.js';
import { runAudited, settleAudit, type AuditScope, type AuditTarget } from '../events/audit.js';
import { ERROR_STATUS } from '../lib/errors.js';
import { idType } from '../lib/ids.js';
import type { Context } from './context.js';
import { toAppError, type Meta } from './init.js';

/**
 * How a mutation is audited (server/events/audit.ts): its scope is opened around the procedure, so the entry is
 * written in the first transaction it commits; once it answered, the entry is settled with the status.
 */

/** The resource a call acts on, from the last parameter of its path (`/webhooks/{id}/test` → the webhook). */
function targetFromInput(meta: Meta | undefined, rawInput: unknown): AuditTarget | undefined {
  const path = meta?.openapi?.path;
  const param = path ? [...path.matchAll(/\{([^}]+)\}/g)].pop()?.[1] : undefined;
  const value = param ? (rawInput as Record<string, unknown> | undefined)?.[param] : undefined;
  if (typeof value !== 'string') return undefined;
  const type = idType(value);
  return type ? { type, id: value } : undefined;
}

/** The resource a create made, from its `location` template (`/vpn/connections/{connection.id}`). */
function targetFromOutput(meta: Meta | undefined, output: unknown): AuditTarget | undefined {
  const field = meta?.location ? /\{([\w.]+)\}/.exec(meta.location)?.[1] : undefined;
  if (!field) return undefined;
  let value: unknown = output;
  for (const key of field.split('.')) value = (value as Record<string, unknown> | undefined)?.[key];
  if (typeof value !== 'string') return undefined;
  const type = idType(value);
  return type ? { type, id: value } : undefined;
}

/** Who an entry names: the user, or the API key the request was made with (and its creator's email). */
export function auditActorOf(actor: Actor) {
  return {
    type: actor.apiKeyId !== undefined ? ('api_key' as const) : ('user' as const),
    id: actor.apiKeyId ?? actor.userId,
    email: actor.email,
    organizationId: actor.organizationId,
  };
}

export function openAuditScope(
  ctx: Context,
  path: string,
  meta: Meta | undefined,
  rawInput: unknown,
  actor: Actor | undefined,
): AuditScope {
  return {
    action: path,
    actor: actor ? auditActorOf(actor) : undefined,
    target: targetFromInput(meta, rawInput),
    request: { requestId: ctx.requestId, ip: ctx.ip, userAgent: ctx.userAgent },
    successStatus: meta?.successStatus ?? 200,
    now: () => ctx.deps.clock.now(),
    entryId: undefined,
  };
}

/** Settles the entry from how the call ended; a failure to write it is logged, never answered. */
export async function settleAuditOf(
  ctx: Context,
  scope: AuditScope,
  meta: Meta | undefined,
  outcome: { ok: true; data: unknown } | { ok: false; error: unknown },
): Promise<void> {
  const status = outcome.ok ? scope.successStatus : ERROR_STATUS[toAppError(outcome.error).code];
  const target = outcome.ok ? targetFromOutput(meta, outcome.data) : undefined;
  try {
    await settleAudit(ctx.deps.db.orm.em.fork(), scope, status, target);
  } catch (err) {
    ctx.deps.log.error(
      { err, requestId: ctx.requestId, action: scope.action },
      'could not write the audit entry',
    );
  }
}

/** Runs `next` in the scope and settles it. */
export async function audited<T extends { ok: boolean }>(
  ctx: Context,
  scope: AuditScope,
  meta: Meta | undefined,
  next: () => Promise<T>,
): Promise<T> {
  const result = await runAudited(scope, next);
  await settleAuditOf(
    ctx,
    scope,
    meta,
    result.ok
      ? { ok: true, data: (result as { data?: unknown }).data }
      : { ok: false, error: (result as { error?: unknown }).error },
  );
  return result;
}
