import type { Database } from '../db/orm.js';
import { AppError } from '../lib/errors.js';
import type { PlanId } from '../lib/plans.js';
import { effectivePermissions, type Permission } from './permissions.js';
import type { AccessClaims, TokenService } from './tokens.js';
import type { Role, UserStatus } from './user.entity.js';

/** Who is calling: loaded fresh on every request, so role, status and revocation apply on the next call. */
export interface Actor {
  userId: string;
  organizationId: string;
  /** The organization's plan when the request started (API quota). */
  plan: PlanId;
  sessionId: string;
  role: Role;
  email: string;
  permissions: ReadonlySet<Permission>;
  /** The user row as loaded with the token. */
  user: ActorUser;
}

/** Verifies a bearer token (signature, algorithm, issuer, audience, expiry). No database access. */
export function verifyBearer(tokens: TokenService, bearer: string | undefined, now: Date): AccessClaims {
  if (!bearer)
    throw new AppError('UNAUTHORIZED', 'Authentication required: send Authorization: Bearer <token>');
  return tokens.verify(bearer, now);
}

/** The caller's user as loaded with the token: enough for the summary view (GET /auth/me) without another query. */
export interface ActorUser {
  id: string;
  email: string;
  name: string;
  role: Role;
  status: UserStatus;
  organization: { id: string };
  permissions: string[];
  twoFactorEnabled: boolean;
  lastLogin: Date | null;
  createdAt: Date;
}

interface ActorRow {
  id: string;
  email: string;
  name: string;
  role: Role;
  status: UserStatus;
  permissions: string[];
  two_factor_enabled: boolean;
  last_login_ms: number | null;
  created_at_ms: number;
  deleted: boolean;
  organization_id: string;
  plan: PlanId;
  session_id: string;
  session_live: boolean;
}

/**
 * The condition every credential's query must put on the organization it resolves to (`o` being its row of
 * `organizations`): a deleted organization's credentials are refused from the commit of `DELETE /organization` on,
 * on every process, because the mark is in the database. A new kind of credential (API keys) resolves through a
 * query that joins `organizations o` and requires this, as ACTOR_SQL does (README, "The organization").
 */
export const ORGANIZATION_LIVE_SQL = 'o.deleted_at is null';

// Every authenticated request runs this: one indexed join, written by hand because it is the hot path (through
// the ORM's query builder and hydration it costs several times the CPU), and prepared once per connection on
// PostgreSQL (planning the join on every call tripled the database's work). Times come back as epoch milliseconds
// so that PostgreSQL and PGlite return the same types.
const ACTOR_SQL = `
  select u.id, u.email, u.name, u.role, u.status, u.permissions, u.two_factor_enabled,
         (extract(epoch from u.last_login) * 1000)::float8 as last_login_ms,
         (extract(epoch from u.created_at) * 1000)::float8 as created_at_ms,
         (u.deleted_at is not null) as deleted,
         o.id as organization_id, o.plan,
         s.id as session_id, (s.revoked_at is null and s.expires_at > $1) as session_live
    from login_sessions s
    join users u on u.id = s.user_id
    join organizations o on o.id = u.organization_id
   where s.id = $2 and s.user_id = $3 and ${ORGANIZATION_LIVE_SQL}`;

/**
 * Loads the user, organization and login session of verified claims in one query. Throws UNAUTHORIZED for anything
 * but an active, unrevoked user of the token's organization.
 */
export async function loadActorForClaims(db: Database, claims: AccessClaims, now: Date): Promise<Actor> {
  const [row] = await db.preparedQuery<ActorRow>('load_actor', ACTOR_SQL, [now, claims.sid, claims.sub]);
  if (
    !row ||
    !row.session_live ||
    row.deleted ||
    row.status !== 'active' ||
    row.organization_id !== claims.org
  ) {
    throw new AppError('UNAUTHORIZED', 'Access token is no longer valid');
  }
  const permissions = Array.isArray(row.permissions) ? row.permissions : [];
  return {
    userId: row.id,
    organizationId: row.organization_id,
    plan: row.plan,
    sessionId: row.session_id,
    role: row.role,
    email: row.email,
    permissions: effectivePermissions(row.role, permissions),
    user: {
      id: row.id,
      email: row.email,
      name: row.name,
      role: row.role,
      status: row.status,
      organization: { id: row.organization_id },
      permissions,
      twoFactorEnabled: row.two_factor_enabled,
      lastLogin: row.last_login_ms === null ? null : new Date(Number(row.last_login_ms)),
      createdAt: new Date(Number(row.created_at_ms)),
    },
  };
}
