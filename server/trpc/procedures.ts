import { loadActorForClaims, verifyBearer, type Actor } from '../access/actor.js';
import { rateLimitHeaders, rateLimitedError } from '../access/api-usage.js';
import type { Permission } from '../access/permissions.js';
import type { Role } from '../access/user.entity.js';
import { AppError } from '../lib/errors.js';
import { baseProcedure, errorMiddleware, middleware } from './init.js';

/** Anyone may call. Errors are converted to the one envelope here. */
export const publicProcedure = baseProcedure.use(errorMiddleware).meta({ auth: 'public' });

/** `/auth/*` endpoints: refused over plain HTTP (conventions §4, HTTPS rule). */
export const authEndpointProcedure = publicProcedure.use(({ ctx, next }) => {
  if (!ctx.secureTransport) {
    throw new AppError('HTTPS_REQUIRED', 'Authentication endpoints require HTTPS');
  }
  return next();
});

/**
 * Token → burst limit (memory, before any query) → user, organization and session (one query) → monthly quota.
 * Every authenticated response carries the burst headers, 429s included.
 */
const requireActor = middleware(async ({ ctx, next }) => {
  const { tokens, apiUsage, clock } = ctx.deps;
  const now = clock.now();
  const claims = verifyBearer(tokens, ctx.bearer, now);
  const burst = await apiUsage.consumeBurst(claims.sid, claims.org, claims.sub);
  Object.assign(ctx.response.headers, rateLimitHeaders(burst));
  if (!burst.allowed) throw rateLimitedError(burst);
  const actor = await loadActorForClaims(ctx.deps.db, claims, now);
  await apiUsage.admit(actor.organizationId, actor.userId, actor.plan);
  return next({ ctx: { ...ctx, actor } });
});

/** A signed-in, active user of an organization: `ctx.actor` is set. */
export const authedProcedure = publicProcedure.use(requireActor).meta({ auth: 'user' });

/** `/auth/me`, `/auth/logout`: HTTPS rule first, then a valid token. */
export const authedAuthEndpointProcedure = authEndpointProcedure.use(requireActor).meta({ auth: 'user' });

/** Authed, and the caller holds `permission` (role defaults plus grants; `admin` implies the other levels). */
export function requirePermission(permission: Permission) {
  return authedProcedure
    .use(({ ctx, next }) => {
      const actor = ctx.actor as Actor;
      if (!actor.permissions.has(permission)) {
        throw new AppError('FORBIDDEN', `This action requires the ${permission} permission`);
      }
      return next();
    })
    .meta({ auth: 'permission', permission });
}

/**
 * Authed, and the caller's role is one of `roles`. For resources that no permission string covers (the permission
 * resources are fixed by the contract): webhooks are owner/admin only (conventions §5).
 */
export function requireRole(...roles: Role[]) {
  return authedProcedure
    .use(({ ctx, next }) => {
      const actor = ctx.actor as Actor;
      if (!roles.includes(actor.role)) {
        throw new AppError('FORBIDDEN', `This action is reserved to the roles: ${roles.join(', ')}`);
      }
      return next();
    })
    .meta({ auth: 'role', roles });
}
