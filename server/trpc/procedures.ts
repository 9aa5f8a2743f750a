import {
  isApiKeySecret,
  loadActorForApiKey,
  loadActorForClaims,
  verifyBearer,
  type Actor,
} from '../access/actor.js';
import { rateLimitHeaders, rateLimitedError } from '../limits/api-usage.js';
import { enforceSecurityPolicy } from '../access/security-policy.js';
import type { Permission } from '../access/permissions.js';
import type { Role } from '../access/user.entity.js';
import { AppError, type ErrorCode } from '../lib/errors.js';
import { runAudited } from '../events/audit.js';
import { audited, openAuditScope, settleAuditOf } from './audit.js';
import { runIdempotent, takesIdempotencyKey } from './idempotency.js';
import type { Context } from './context.js';
import {
  assertAcceptableInput,
  baseProcedure,
  errorMiddleware,
  middleware,
  rethrowAsTRPCError,
  type Meta,
} from './init.js';

/**
 * What every authenticated call may be answered: bad or expired token, burst limit or monthly quota, not allowed,
 * and the organization's security policy (docs/organization.md, "Security policies").
 */
const AUTHENTICATED_ERRORS: readonly ErrorCode[] = [
  'UNAUTHORIZED',
  'TOKEN_EXPIRED',
  'FORBIDDEN',
  'IP_NOT_ALLOWED',
  'TWO_FACTOR_REQUIRED',
  'RATE_LIMITED',
  'QUOTA_EXCEEDED',
];

/** Anyone may call. Errors are converted to the one envelope here; unacceptable input is refused (init.ts). */
export const publicProcedure = baseProcedure.use(errorMiddleware).meta({ auth: 'public', baseErrors: [] });

/**
 * `/auth/*` endpoints anyone may call: refused over plain HTTP (the HTTPS rule, docs/api-conventions.md "Errors"), then as publicProcedure,
 * in one middleware (so the HTTPS rule answers before any input check, as it does for authenticated procedures).
 */
export const authEndpointProcedure = baseProcedure
  .use(
    middleware(async ({ ctx, next, getRawInput, type, path, meta }) => {
      try {
        requireSecureTransport(ctx);
        // Per client address and endpoint, before any input is read or password hashed (docs/security.md).
        if (type === 'mutation') await ctx.deps.authLimits.consume(path, ctx.ip);
        await assertAcceptableInput(getRawInput);
      } catch (err) {
        rethrowAsTRPCError(ctx, err);
      }
      // Who acts is learnt as the mutation runs (login, refresh, ...): its service names them (noteAuditActor).
      const result =
        type === 'mutation' && ctx.deps.config.auditLogEnabled
          ? await audited(ctx, openAuditScope(ctx, path, meta, await getRawInput(), undefined), meta, () =>
              next(),
            )
          : await next();
      if (!result.ok) rethrowAsTRPCError(ctx, result.error);
      return result;
    }),
  )
  .meta({ auth: 'public', baseErrors: ['HTTPS_REQUIRED', 'RATE_LIMITED'] });

/**
 * Token → burst limit (memory, before any query) → user, organization and session (one query) → monthly quota.
 * Every authenticated response carries the burst headers, 429s included. With Redis, the burst and the quota are
 * both counted in the one round trip before the query (the quota against the organization of the token), and the
 * plan's limit is applied to that count once the organization is loaded.
 */
async function loadActor(ctx: Context): Promise<Actor> {
  const { tokens, apiUsage, clock } = ctx.deps;
  const now = clock.now();
  if (isApiKeySecret(ctx.bearer)) return loadApiKeyActor(ctx, now);
  const claims = verifyBearer(tokens, ctx.bearer, now);
  const burst = await apiUsage.consumeBurst(claims.sid, claims.org, claims.sub);
  Object.assign(ctx.response.headers, rateLimitHeaders(burst));
  if (!burst.allowed) throw rateLimitedError(burst);
  let actor: Actor;
  try {
    actor = await loadActorForClaims(ctx.deps.db, claims, now);
  } catch (err) {
    // Not a call (a revoked session, a removed user): what the burst step counted toward the quota is given back.
    apiUsage.release(burst);
    throw err;
  }
  await apiUsage.admit(actor.organizationId, actor.userId, actor.plan, burst);
  return actor;
}

/**
 * `Authorization: Bearer sk_…`: the key, its creator and organization (one query, the same hot path as tokens) →
 * the key's own burst budget → the organization's monthly quota. `last_used_at` is noted in memory and written
 * with the usage counters' next flush, at most once a minute.
 */
async function loadApiKeyActor(ctx: Context, now: Date): Promise<Actor> {
  const { apiUsage } = ctx.deps;
  const actor = await loadActorForApiKey(ctx.deps.db, ctx.bearer!, now);
  const burst = await apiUsage.consumeBurst(actor.apiKeyId, actor.organizationId, actor.userId);
  Object.assign(ctx.response.headers, rateLimitHeaders(burst));
  if (!burst.allowed) throw rateLimitedError(burst);
  await apiUsage.admit(actor.organizationId, actor.userId, actor.plan, burst);
  apiUsage.noteKeyUse(actor.apiKeyId, actor.lastUsedMs, now);
  return actor;
}

/** Refusals that mean the bearer may no longer act (an open stream is then closed). */
const ACCESS_ENDED: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'UNAUTHORIZED',
  'TOKEN_EXPIRED',
  'IP_NOT_ALLOWED',
  'TWO_FACTOR_REQUIRED',
]);

/**
 * Whether the bearer of a long-lived response (an event stream) may still act: the token verifies and has not
 * expired, its login session is live (not logged out, not revoked), or the API key is not revoked, the user is
 * neither suspended nor deleted, and the organization's security policy still lets it in (a stream is no
 * exception to the two-factor rule). Counts nothing against the burst limit or the quota. False only when access
 * has ended; a failure to check (the database unreachable) throws, and the stream is left open.
 */
export async function bearerStillValid(ctx: Context): Promise<boolean> {
  const { tokens, db, clock } = ctx.deps;
  const now = clock.now();
  try {
    const actor = isApiKeySecret(ctx.bearer)
      ? await loadActorForApiKey(db, ctx.bearer, now)
      : await loadActorForClaims(db, verifyBearer(tokens, ctx.bearer, now), now);
    enforceSecurityPolicy(actor, ctx.ip, '');
    return true;
  } catch (err) {
    if (err instanceof AppError && ACCESS_ENDED.has(err.code)) return false;
    throw err;
  }
}

/**
 * Parts of the API closed to API keys whatever their permissions (docs/api-keys.md, "API keys"): signing in and out, the
 * keys themselves, users, webhooks and the audit log. Every operation gated by a role is closed too (authorize).
 */
const CLOSED_TO_API_KEYS = ['auth.', 'apiKeys.', 'users.', 'webhooks.', 'audit.'];

/** Whether the procedure at `path` refuses API keys (403) whatever they hold; the OpenAPI document says so too. */
export function isClosedToApiKeys(path: string, required: { roles?: readonly Role[] | undefined }): boolean {
  return required.roles !== undefined || CLOSED_TO_API_KEYS.some((prefix) => path.startsWith(prefix));
}

/**
 * What `next` is given by the authenticated middleware: nothing at run time (the actor was set on the request's own
 * context, and tRPC passes the same context on when `next` gets no `ctx`), but to the compiler a context whose
 * `actor` is non-null, so that procedures hand it to services as an ActorContext without a `!`.
 */
const ACTOR_SET = {} as { ctx: { actor: Actor } };

/** What a base procedure requires beyond a signed-in user. */
interface Requirement {
  permission?: Permission;
  roles?: readonly Role[];
}

function authorize(actor: Actor, required: Requirement, path: string): void {
  if (actor.apiKeyId !== undefined && isClosedToApiKeys(path, required)) {
    throw new AppError(
      'FORBIDDEN',
      'This operation cannot be called with an API key: call it with a user’s access token (POST /v1/auth/login)',
    );
  }
  if (required.permission && !actor.permissions.has(required.permission)) {
    throw new AppError(
      'FORBIDDEN',
      `This action requires the ${required.permission} permission: an owner or an admin can grant it (PUT /v1/users/{id}/permissions)`,
    );
  }
  if (required.roles && !required.roles.includes(actor.role)) {
    throw new AppError(
      'FORBIDDEN',
      `This action is reserved to the roles: ${required.roles.join(', ')}; ask one of them to do it`,
    );
  }
}

/** What the steps of the authenticated middleware read of the call. */
interface Call {
  ctx: Context;
  path: string;
  type: string;
  meta: Meta | undefined;
  getRawInput: () => Promise<unknown>;
}

/** What a procedure's run gives back to its middleware (tRPC's result, as far as these steps read it). */
type CallResult = { ok: true; data: unknown } | { ok: false; error: unknown };

/**
 * Every authenticated procedure goes through this one middleware: error conversion (as errorMiddleware), the HTTPS
 * rule where asked, the caller, the permission or role it was built with, then the check of unacceptable input
 * (as errorMiddleware; after the caller, as schema validation comes after it). One hop instead of four: each hop
 * through tRPC's middleware chain copies its options and context, which was a tenth of a request's CPU. The
 * requirement is enforced from here, not read back from the meta (which only records it for the security table
 * and the OpenAPI document), so no later `.meta()` can loosen it. The actor is set on the request's own context
 * rather than passed to `next` (which would copy the context again).
 *
 * Its steps, in order: admitCaller (HTTPS rule, token, burst limit and quota, authorization, input), then a
 * query runs as it is, and a change runs through runChange (audit scope, idempotency, audit entry).
 */
function authenticated(opts: { httpsOnly: boolean } & Requirement) {
  return middleware(async ({ ctx, next, getRawInput, type, path, meta }) => {
    const call: Call = { ctx, path, type, meta, getRawInput };
    const actor = await admitCaller(call, opts);
    const result =
      type === 'mutation' ? await runChange(call, actor, () => next(ACTOR_SET)) : await next(ACTOR_SET);
    if (!result.ok) rethrowAsTRPCError(ctx, result.error);
    return result;
  });
}

/**
 * The checks before the procedure runs: the HTTPS rule where asked, the caller (token, burst limit, quota), what
 * it may do, and its input. A refusal is thrown converted; a signed-in caller refused a change (403) is in the
 * audit log too.
 */
async function admitCaller(call: Call, opts: { httpsOnly: boolean } & Requirement): Promise<Actor> {
  const { ctx } = call;
  let actor: Actor | undefined;
  try {
    if (opts.httpsOnly) requireSecureTransport(ctx);
    actor = await loadActor(ctx);
    // The organization's policy first: an address outside its ranges learns nothing about what it may do.
    enforceSecurityPolicy(actor, ctx.ip, call.path);
    authorize(actor, opts, call.path);
    ctx.actor = actor;
    await assertAcceptableInput(call.getRawInput);
    return actor;
  } catch (err) {
    if (call.type === 'mutation' && actor) await auditRefusal(call, actor, err);
    rethrowAsTRPCError(ctx, err);
  }
}

/** The HTTPS rule (docs/api-conventions.md "Errors"): authentication endpoints are refused over plain HTTP. */
function requireSecureTransport(ctx: Context): void {
  if (!ctx.secureTransport) throw new AppError('HTTPS_REQUIRED', 'Authentication endpoints require HTTPS');
}

/** Records a change refused before it ran, when the audit log is on. */
async function auditRefusal(call: Call, actor: Actor, err: unknown): Promise<void> {
  const { ctx, path, meta } = call;
  if (!ctx.deps.config.auditLogEnabled) return;
  const scope = openAuditScope(ctx, path, meta, await call.getRawInput().catch(() => undefined), actor);
  await settleAuditOf(ctx, scope, meta, { ok: false, error: err });
}

/**
 * A change: run in its audit scope (when the audit log is on), once per `Idempotency-Key` where the operation
 * takes one (a replay gives the kept answer and writes no audit entry), then its audit entry.
 */
async function runChange<R extends CallResult>(call: Call, actor: Actor, next: () => Promise<R>): Promise<R> {
  const { ctx, path, meta } = call;
  const rawInput = await call.getRawInput();
  const scope = ctx.deps.config.auditLogEnabled
    ? openAuditScope(ctx, path, meta, rawInput, actor)
    : undefined;
  const run = () => (scope ? runAudited(scope, next) : next());
  let result: R;
  let replayed = false;
  if (ctx.idempotencyKey !== undefined && takesIdempotencyKey(meta)) {
    try {
      ({ result, replayed } = await runIdempotent(
        ctx,
        { path, meta, rawInput, actor, key: ctx.idempotencyKey },
        run,
      ));
    } catch (err) {
      // Refused before running (409 in flight is recorded like any refused change; 400 and 422 are not).
      if (scope) await settleAuditOf(ctx, scope, meta, { ok: false, error: err });
      rethrowAsTRPCError(ctx, err);
    }
  } else {
    result = await run();
  }
  if (scope && !replayed) {
    const outcome: CallResult = result;
    await settleAuditOf(
      ctx,
      scope,
      meta,
      outcome.ok ? { ok: true, data: outcome.data } : { ok: false, error: outcome.error },
    );
  }
  return result;
}

/** A signed-in, active user of an organization: `ctx.actor` is set. */
export const authedProcedure = baseProcedure
  .use(authenticated({ httpsOnly: false }))
  .meta({ auth: 'user', baseErrors: AUTHENTICATED_ERRORS });

/** `/auth/me`, `/auth/logout`: HTTPS rule first, then a valid token. */
export const authedAuthEndpointProcedure = baseProcedure
  .use(authenticated({ httpsOnly: true }))
  .meta({ auth: 'user', baseErrors: [...AUTHENTICATED_ERRORS, 'HTTPS_REQUIRED'] });

/** Authed, and the caller holds `permission` (role defaults plus grants; `admin` implies the other levels). */
export function requirePermission(permission: Permission) {
  return baseProcedure
    .use(authenticated({ httpsOnly: false, permission }))
    .meta({ auth: 'permission', permission, baseErrors: AUTHENTICATED_ERRORS });
}

/**
 * Authed, and the caller's role is one of `roles`. For resources that no permission string covers (the permission
 * resources are fixed by the contract): webhooks are owner/admin only (docs/users-and-permissions.md).
 */
export function requireRole(...roles: Role[]) {
  return baseProcedure
    .use(authenticated({ httpsOnly: false, roles }))
    .meta({ auth: 'role', roles, baseErrors: AUTHENTICATED_ERRORS });
}
