import { z } from 'zod';
import { effectivePermissions } from '../../access/permissions.js';
import { ROLES, USER_STATUSES, type User } from '../../access/user.entity.js';
import { iso } from '../../lib/time.js';

export const ZUserSummary = z
  .object({
    id: z.string().describe('User id, `usr_…`'),
    email: z.string().describe('Email address (lower case)'),
    name: z.string(),
    role: z.enum(ROLES).describe('`owner`, `admin` or `member`'),
    status: z.enum(USER_STATUSES),
    organization_id: z.string().describe('Organization id, `org_…`'),
    permissions: z.array(z.string()).describe('Effective permissions, `<resource>:<level>`'),
    two_factor_enabled: z.boolean(),
    last_login: z.string().nullable().describe('ISO 8601 UTC, null before the first login'),
    created_at: z.string(),
  })
  .meta({ id: 'UserSummary' });
export type TUserSummary = z.infer<typeof ZUserSummary>;

export function toUserSummaryDto(u: User): TUserSummary {
  return {
    id: u.id,
    email: u.email,
    name: u.name,
    role: u.role,
    status: u.status,
    organization_id: u.organization.id,
    permissions: [...effectivePermissions(u.role, u.permissions)].sort(),
    two_factor_enabled: u.twoFactorEnabled,
    last_login: iso(u.lastLogin),
    created_at: iso(u.createdAt)!,
  };
}
