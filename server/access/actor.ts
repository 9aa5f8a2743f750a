import type { Em } from '../db/orm.js';
import { AppError } from '../lib/errors.js';
import type { PlanId } from '../lib/plans.js';
import { effectivePermissions, type Permission } from './permissions.js';
import { LoginSession } from './session.entity.js';
import type { AccessClaims, TokenService } from './tokens.js';
import type { Role } from './user.entity.js';

/** Who is calling: loaded fresh on every request, so role, status and revocation apply on the next call. */
export interface Actor {
  userId: string;
  organizationId: string;
  /** The organization's plan when the request started (API quota). */
  plan: PlanId;
  sessionId: string;
  role: Role;
  email: string;
  permissions: Set<Permission>;
}

/** Verifies a bearer token (signature, algorithm, issuer, audience, expiry). No database access. */
export function verifyBearer(tokens: TokenService, bearer: string | undefined, now: Date): AccessClaims {
  if (!bearer)
    throw new AppError('UNAUTHORIZED', 'Authentication required: send Authorization: Bearer <token>');
  return tokens.verify(bearer, now);
}

/**
 * Loads the user, organization and login session of verified claims in one query. Throws UNAUTHORIZED for anything
 * but an active, unrevoked user of the token's organization. The entities stay in the request's identity map, so a
 * service reading the caller's user (GET /auth/me) needs no second query.
 */
export async function loadActorForClaims(em: Em, claims: AccessClaims, now: Date): Promise<Actor> {
  const session = await em.findOne(
    LoginSession,
    { id: claims.sid, user: claims.sub },
    { populate: ['user.organization'] },
  );
  const user = session?.user;
  if (
    !session ||
    !user ||
    session.revokedAt ||
    session.expiresAt.getTime() <= now.getTime() ||
    user.deletedAt ||
    user.status !== 'active' ||
    user.organization.id !== claims.org
  ) {
    throw new AppError('UNAUTHORIZED', 'Access token is no longer valid');
  }
  return {
    userId: user.id,
    organizationId: claims.org,
    plan: user.organization.plan,
    sessionId: session.id,
    role: user.role,
    email: user.email,
    permissions: effectivePermissions(user.role, user.permissions),
  };
}
