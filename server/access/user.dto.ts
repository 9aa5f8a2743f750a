import { z } from 'zod';
import {
  effectivePermissionList,
  OBJECT_FORM_LEVELS,
  OBJECT_FORM_RESOURCES,
  PERMISSIONS,
  type PermissionObject,
} from './permissions.js';
import type { Em } from '../db/orm.js';
import { apiCallsSince } from '../limits/api-usage.js';
import type { ActivityCounter, OwnedResources } from './owned-resources.js';
import { ROLES, USER_STATUSES, type User } from './user.entity.js';
import { iso } from '../lib/time.js';

/** Shown when the user has not chosen a time zone or language. */
export const DEFAULT_TIMEZONE = 'UTC';
export const DEFAULT_LANGUAGE = 'en';

const summaryShape = {
  id: z.string().describe('User id, `usr_…`'),
  email: z.string().describe('Email address (lower case)'),
  name: z.string(),
  role: z.enum(ROLES).describe('`owner` (one per organization), `admin` or `member`'),
  status: z
    .enum(USER_STATUSES)
    .describe('`invited` until the invitation is accepted, then `active`; `suspended` users cannot sign in'),
  organization_id: z.string().describe('Organization id, `org_…`'),
  permissions: z
    .array(z.enum(PERMISSIONS))
    .describe(
      'Effective permissions, `<resource>:<level>`; a `<resource>:admin` grant is listed with the read, write and ' +
        'delete levels it implies. The owner holds every permission.',
    ),
  two_factor_enabled: z.boolean(),
  last_login: z.string().nullable().describe('ISO 8601 UTC, null before the first login'),
  created_at: z.string(),
};

/** The list view of a user (and the `user` of login, register and /auth/me). */
export const ZUserSummary = z.object(summaryShape).meta({ id: 'UserSummary' });
export type TUserSummary = z.infer<typeof ZUserSummary>;

export const ZUserProfile = z
  .object({
    avatar_url: z.string().nullable().describe('URL of the avatar image, or null'),
    timezone: z.string().describe(`IANA time zone, e.g. \`Europe/Paris\` (default \`${DEFAULT_TIMEZONE}\`)`),
    language: z
      .string()
      .describe(`BCP 47 language tag, e.g. \`fr\` or \`pt-BR\` (default \`${DEFAULT_LANGUAGE}\`)`),
  })
  .meta({ id: 'UserProfile' });

export const ZUserActivity = z
  .object({
    vpn_connections: z.number().int().describe('VPN connections the user owns'),
    databases_created: z.number().int().describe('Databases the user owns'),
    api_calls_30d: z
      .number()
      .int()
      .describe('Authenticated API requests made by the user in the last 30 days'),
  })
  .meta({ id: 'UserActivity' });
export type TUserActivity = z.infer<typeof ZUserActivity>;

/** The detail view: the summary plus `profile` and `activity`. */
export const ZUserDetail = z
  .object({ ...summaryShape, profile: ZUserProfile, activity: ZUserActivity })
  .meta({ id: 'User' });
export type TUserDetail = z.infer<typeof ZUserDetail>;

const levelsSchema = (levels: readonly string[]) =>
  z.object(Object.fromEntries(levels.map((l) => [l, z.boolean()])));

export const ZPermissionObject = z
  .object(
    Object.fromEntries(OBJECT_FORM_RESOURCES.map((r) => [r, levelsSchema(OBJECT_FORM_LEVELS[r])])) as Record<
      (typeof OBJECT_FORM_RESOURCES)[number],
      ReturnType<typeof levelsSchema>
    >,
  )
  .describe(
    'The permissions of `vpn`, `database` and `hosting` as `{read, write, delete}` and of `billing` as ' +
      '`{read, write}`: the same set as the user’s `permissions` strings. A `<resource>:admin` string grant shows ' +
      'here as all of that resource’s booleans true; `users:*` grants are managed through the string form.',
  )
  .meta({ id: 'PermissionObject' });

/** What the summary view reads: a User entity, or the caller's row loaded with the token (ActorUser). */
export type UserSummarySource = Pick<
  User,
  'id' | 'email' | 'name' | 'role' | 'status' | 'permissions' | 'twoFactorEnabled' | 'lastLogin' | 'createdAt'
> & { organization: { id: string } };

export function toUserSummaryDto(u: UserSummarySource): TUserSummary {
  return {
    id: u.id,
    email: u.email,
    name: u.name,
    role: u.role,
    status: u.status,
    organization_id: u.organization.id,
    permissions: [...effectivePermissionList(u.role, u.permissions)],
    two_factor_enabled: u.twoFactorEnabled,
    last_login: iso(u.lastLogin),
    created_at: iso(u.createdAt)!,
  };
}

export function toUserDetailDto(
  u: User,
  activity: Record<ActivityCounter, number> & { api_calls_30d: number },
) {
  return {
    ...toUserSummaryDto(u),
    profile: {
      avatar_url: u.avatarUrl ?? null,
      timezone: u.timezone ?? DEFAULT_TIMEZONE,
      language: u.language ?? DEFAULT_LANGUAGE,
    },
    activity: {
      vpn_connections: activity.vpn_connections,
      databases_created: activity.databases_created,
      api_calls_30d: activity.api_calls_30d,
    },
  } satisfies TUserDetail;
}

export type { PermissionObject };

const ACTIVITY_WINDOW_MS = 30 * 86_400_000;

/** The detail view of a user: the summary plus their profile and activity counters (owned resources, API calls). */
export async function loadUserDetail(
  em: Em,
  owned: OwnedResources,
  user: User,
  now: Date,
): Promise<TUserDetail> {
  const who = { organizationId: user.organization.id, userId: user.id };
  const counts = await owned.countActivity(em, who);
  const apiCalls = await apiCallsSince(em, { ...who, since: new Date(now.getTime() - ACTIVITY_WINDOW_MS) });
  return toUserDetailDto(user, { ...counts, api_calls_30d: apiCalls });
}
