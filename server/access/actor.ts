import type { Database, Em } from '../db/orm.js';
import { invalidAccessToken, invalidApiKey, unauthorized } from '../lib/errors.js';
import type { PlanId } from '../lib/plans.js';
import { sha256Hex } from '../lib/crypto.js';
import { effectivePermissions, type Permission } from './permissions.js';
import { policyInForce, type SecurityPolicy, type StoredSecurityPolicy } from './security-policy.js';
import type { SessionMethod } from './session.entity.js';
import type { AccessClaims, TokenService } from './tokens.js';
import type { Role, UserStatus } from './user.entity.js';

/** Who is calling: loaded fresh on every request, so role, status and revocation apply on the next call. */
export interface Actor {
  userId: string;
  organizationId: string;
  /** The organization's plan when the request started (API quota). */
  plan: PlanId;
  /** The login session of an access token; for an API key, the key's id. */
  sessionId: string;
  /**
   * Set when the request was authenticated by an API key (`key_…`): the actor is the key's creator, with
   * `permissions` narrowed to the key's (docs/api-keys.md, "API keys"), and role-gated operations are closed to it.
   */
  apiKeyId?: string;
  role: Role;
  email: string;
  permissions: ReadonlySet<Permission>;
  /** The user row as loaded with the token. */
  user: ActorUser;
  /** How the access token's login session signed in; unset for an API key. */
  sessionMethod?: SessionMethod;
  /**
   * The organization's security policy in force, read with the caller (security-policy.ts); null or unset: none
   * applies.
   */
  policy?: SecurityPolicy | null;
}

/** Verifies a bearer token (signature, algorithm, issuer, audience, expiry). No database access. */
export function verifyBearer(tokens: TokenService, bearer: string | undefined, now: Date): AccessClaims {
  if (!bearer) throw unauthorized();
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

interface ActorRow extends StoredSecurityPolicy {
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
  session_method: SessionMethod;
  /** Whether the session is younger than the organization's `session_max_age` (true when it has none). */
  session_young: boolean;
}

/**
 * The condition every credential's query must put on the organization it resolves to (`o` being its row of
 * `organizations`): a deleted organization's credentials are refused from the commit of `DELETE /organization` on,
 * on every process, because the mark is in the database. A new kind of credential (API keys) resolves through a
 * query that joins `organizations o` and requires this, as ACTOR_SQL does (docs/organization.md, "The organization").
 */
export const ORGANIZATION_LIVE_SQL = 'o.deleted_at is null';

// Every authenticated request runs this: one indexed join, written by hand because it is the hot path (through
// the ORM's query builder and hydration it costs several times the CPU), and prepared once per connection on
// PostgreSQL (planning the join on every call tripled the database's work). Times come back as epoch milliseconds
// so that PostgreSQL and PGlite return the same types. The organization's security policy is read here too (its
// columns of the same row): no query of its own, and a change applies from the next request on every process.
const ACTOR_SQL = `
  select u.id, u.email, u.name, u.role, u.status, u.permissions, u.two_factor_enabled,
         (extract(epoch from u.last_login) * 1000)::float8 as last_login_ms,
         (extract(epoch from u.created_at) * 1000)::float8 as created_at_ms,
         (u.deleted_at is not null) as deleted,
         o.id as organization_id, o.plan,
         o.require_two_factor, o.allowed_ip_ranges, o.session_max_age,
         s.id as session_id, (s.revoked_at is null and s.expires_at > $1) as session_live, s.method as session_method,
         (o.session_max_age is null or s.created_at + o.session_max_age * interval '1 second' > $1) as session_young
    from login_sessions s
    join users u on u.id = s.user_id
    join organizations o on o.id = u.organization_id
   where s.id = $2 and s.user_id = $3 and ${ORGANIZATION_LIVE_SQL}`;

/**
 * Loads the user, organization and login session of verified claims in one query. Throws UNAUTHORIZED for anything
 * but an active, unrevoked user of the token's organization, and for a session older than the organization's
 * `session_max_age` (docs/organization.md, "Security policies"), as for one past the server's `SESSION_MAX_AGE`.
 */
export async function loadActorForClaims(db: Database, claims: AccessClaims, now: Date): Promise<Actor> {
  const [row] = await db.preparedQuery<ActorRow>('load_actor', ACTOR_SQL, [now, claims.sid, claims.sub]);
  const policy = row ? policyInForce(row) : null;
  if (
    !row ||
    !row.session_live ||
    row.deleted ||
    row.status !== 'active' ||
    row.organization_id !== claims.org ||
    (policy?.sessionMaxAgeSeconds != null && !row.session_young)
  ) {
    throw invalidAccessToken(
      'Access token is no longer valid (signed out, session expired, or the user was suspended or removed)',
    );
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
    sessionMethod: row.session_method,
    policy,
  };
}

/** API key secrets (docs/api-keys.md, "API keys"): `sk_` + base64url of 32 random bytes. */
export const API_KEY_SECRET_PREFIX = 'sk_';

/** `sk_` and the base64url of 32 bytes (43 characters). */
const API_KEY_SHAPE = /^sk_[A-Za-z0-9_-]{43}$/;

/** Whether a bearer token is an API key secret rather than an access token (a JWT never starts with `sk_`). */
export function isApiKeySecret(bearer: string | undefined): bearer is string {
  return bearer !== undefined && bearer.startsWith(API_KEY_SECRET_PREFIX);
}

/** What is stored of a secret: its SHA-256 (the secret has 256 random bits, so no slow hash is needed). */
export function hashApiKeySecret(secret: string): string {
  return sha256Hex(secret);
}

interface ApiKeyActorRow extends Omit<
  ActorRow,
  'session_id' | 'session_live' | 'session_method' | 'session_young'
> {
  key_id: string;
  key_organization_id: string;
  key_permissions: string[];
  key_live: boolean;
  key_unexpired: boolean;
  key_last_used_ms: number | null;
}

// The same hot path as access tokens (ACTOR_SQL): the key, its creator and the organization in one indexed,
// prepared query. Revocation, expiry and the creator's status and permissions are read on every request, so a
// change made by any process applies from the next request on; so is the organization's security policy.
const API_KEY_ACTOR_SQL = `
  select u.id, u.email, u.name, u.role, u.status, u.permissions, u.two_factor_enabled,
         (extract(epoch from u.last_login) * 1000)::float8 as last_login_ms,
         (extract(epoch from u.created_at) * 1000)::float8 as created_at_ms,
         (u.deleted_at is not null) as deleted,
         o.id as organization_id, o.plan,
         o.require_two_factor, o.allowed_ip_ranges, o.session_max_age,
         k.id as key_id, k.organization_id as key_organization_id, k.permissions as key_permissions,
         (k.revoked_at is null) as key_live, (k.expires_at > $1) as key_unexpired,
         (extract(epoch from k.last_used_at) * 1000)::float8 as key_last_used_ms
    from api_keys k
    join users u on u.id = k.created_by_id
    join organizations o on o.id = u.organization_id
   where k.secret_hash = $2 and ${ORGANIZATION_LIVE_SQL}`;

/** Key permissions ∩ creator's, memoised like effectivePermissions (a handful of distinct pairs). */
const narrowedCache = new Map<string, ReadonlySet<Permission>>();
function narrowed(creator: ReadonlySet<Permission>, creatorKey: string, key: readonly string[]) {
  const cacheKey = `${creatorKey}#${key.join(',')}`;
  let set = narrowedCache.get(cacheKey);
  if (!set) {
    if (narrowedCache.size >= 1000) narrowedCache.clear();
    // `<resource>:admin` on the key implies the levels, as for users.
    const listed = effectivePermissions('member', key);
    set = new Set([...listed].filter((p) => creator.has(p)));
    narrowedCache.set(cacheKey, set);
  }
  return set;
}

/** What the API key hot path also reports, for the `last_used_at` bookkeeping. */
export interface ApiKeyActor extends Actor {
  apiKeyId: string;
  /** `last_used_at` as stored when the request was authenticated (epoch ms), or null. */
  lastUsedMs: number | null;
}

/**
 * Loads the key of an `sk_…` bearer with its creator and organization in one query. Throws UNAUTHORIZED for an
 * unknown, revoked or expired key, and for a key whose creator is no longer an active user of its organization.
 */
export async function loadActorForApiKey(db: Database, secret: string, now: Date): Promise<ApiKeyActor> {
  // Only the shape a key has is looked up: anything else is refused without a query.
  if (!API_KEY_SHAPE.test(secret)) throw invalidApiKey();
  const [row] = await db.preparedQuery<ApiKeyActorRow>('load_api_key_actor', API_KEY_ACTOR_SQL, [
    now,
    hashApiKeySecret(secret),
  ]);
  if (!row || !row.key_live || row.deleted || row.status !== 'active') {
    throw invalidApiKey();
  }
  if (row.organization_id !== row.key_organization_id) {
    throw invalidApiKey();
  }
  if (!row.key_unexpired) throw invalidApiKey('API key has expired');
  const userPermissions = Array.isArray(row.permissions) ? row.permissions : [];
  const keyPermissions = Array.isArray(row.key_permissions) ? row.key_permissions : [];
  const creator = effectivePermissions(row.role, userPermissions);
  const creatorKey = row.role === 'owner' ? 'owner' : `${row.role}|${userPermissions.join(',')}`;
  return {
    userId: row.id,
    organizationId: row.organization_id,
    plan: row.plan,
    sessionId: row.key_id,
    apiKeyId: row.key_id,
    lastUsedMs: row.key_last_used_ms === null ? null : Number(row.key_last_used_ms),
    role: row.role,
    email: row.email,
    permissions: narrowed(creator, creatorKey, keyPermissions),
    user: {
      id: row.id,
      email: row.email,
      name: row.name,
      role: row.role,
      status: row.status,
      organization: { id: row.organization_id },
      permissions: userPermissions,
      twoFactorEnabled: row.two_factor_enabled,
      lastLogin: row.last_login_ms === null ? null : new Date(Number(row.last_login_ms)),
      createdAt: new Date(Number(row.created_at_ms)),
    },
    policy: policyInForce(row),
  };
}

/**
 * Revokes every live API key a user created (docs/api-keys.md, "API keys": deleting or suspending the creator revokes its
 * keys). Run in the transaction that deletes or suspends the user.
 */
export async function revokeApiKeysOf(em: Em, userId: string, now: Date): Promise<void> {
  await em.execute(
    'update "api_keys" set "revoked_at" = ?, "updated_at" = ? where "created_by_id" = ? and "revoked_at" is null',
    [now, now, userId],
    'run',
  );
}
