import type { Em } from '../db/orm.js';
import { AppError } from '../lib/errors.js';
import { effectivePermissions, type Permission } from './permissions.js';
import { LoginSession } from './session.entity.js';
import type { TokenService } from './tokens.js';
import type { Role } from './user.entity.js';

/** Who is calling: loaded fresh on every request, so role, status and revocation apply on the next call. */
export interface Actor {
  userId: string;
  organizationId: string;
  sessionId: string;
  role: Role;
  email: string;
  permissions: Set<Permission>;
}

/**
 * Verifies a bearer token and loads its user and login session in one query. Throws UNAUTHORIZED for anything but
 * an active, unrevoked user of the token's organization, TOKEN_EXPIRED for an expired token.
 */
export async function loadActor(em: Em, tokens: TokenService, bearer: string | undefined): Promise<Actor> {
  if (!bearer)
    throw new AppError('UNAUTHORIZED', 'Authentication required: send Authorization: Bearer <token>');
  const claims = tokens.verify(bearer);
  const session = await em.findOne(
    LoginSession,
    { id: claims.sid, user: claims.sub },
    { populate: ['user'], disableIdentityMap: true },
  );
  const user = session?.user;
  if (
    !session ||
    !user ||
    session.revokedAt ||
    session.expiresAt.getTime() <= Date.now() ||
    user.deletedAt ||
    user.status !== 'active' ||
    user.organization.id !== claims.org
  ) {
    throw new AppError('UNAUTHORIZED', 'Access token is no longer valid');
  }
  return {
    userId: user.id,
    organizationId: claims.org,
    sessionId: session.id,
    role: user.role,
    email: user.email,
    permissions: effectivePermissions(user.role, user.permissions),
  };
}
