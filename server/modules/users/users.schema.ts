import { z } from 'zod';
import { OBJECT_FORM_LEVELS, OBJECT_FORM_RESOURCES, PERMISSIONS } from '../../access/permissions.js';
import { ASSIGNABLE_ROLES, ROLES, USER_STATUSES } from '../../access/user.entity.js';
import { pageQueryShape, pageResponse } from '../../lib/pagination.js';
import { okResponse, ZEmail, ZNewPassword, zPathId } from '../../lib/schema.js';
import { ZPermissionObject, ZUserDetail, ZUserSummary } from '../../access/user.dto.js';

const ZUserId = zPathId('usr', 'User');

export const ZPermissionString = z
  .enum(PERMISSIONS)
  .describe(
    '`<resource>:<level>`: resources vpn, database, hosting, billing, users; levels read, write, delete, admin',
  );

const ZPermissionList = z
  .array(ZPermissionString)
  .max(PERMISSIONS.length * 2)
  .describe(
    'Permission strings. `<resource>:admin` implies the read, write and delete levels of the resource and is ' +
      'listed with them.',
  );

/** IANA zone names (`Europe/Paris`, `UTC`, `America/Argentina/Buenos_Aires`), as known to the runtime. */
const IANA_ZONES = new Set(Intl.supportedValuesOf('timeZone'));
function isIanaTimeZone(tz: string): boolean {
  if (IANA_ZONES.has(tz) || tz === 'UTC' || tz === 'Etc/UTC') return true;
  // Links such as `Asia/Calcutta` or `US/Pacific` are not in the canonical list but name IANA zones too.
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(tz)) return false;
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

function canonicalLanguage(tag: string): string | undefined {
  try {
    const [canonical] = Intl.getCanonicalLocales(tag);
    return canonical;
  } catch {
    return undefined;
  }
}

export const ZProfileInput = z
  .strictObject({
    avatar_url: z
      .url({ protocol: /^https?$/, error: 'Must be an http(s) URL' })
      .max(2048)
      .nullable()
      .optional()
      .describe('http(s) URL of the avatar image; null removes it'),
    timezone: z
      .string()
      .max(64)
      .refine(isIanaTimeZone, 'Must be an IANA time zone such as Europe/Paris')
      .nullable()
      .optional()
      .describe('IANA time zone, e.g. `Europe/Paris`; null resets it to `UTC`'),
    language: z
      .string()
      .max(16)
      .transform((s, ctx) => {
        const c = canonicalLanguage(s);
        if (!c || c.length > 16) {
          ctx.addIssue({ code: 'custom', message: 'Must be a BCP 47 language tag such as en or pt-BR' });
          return z.NEVER;
        }
        return c;
      })
      .nullable()
      .optional()
      .describe('BCP 47 language tag, e.g. `fr` or `pt-BR`; null resets it to `en`'),
  })
  .describe('Fields of the profile to change; absent fields stay as they are');

export const ZListUsersInput = z
  .object({
    ...pageQueryShape,
    role: z.enum(ROLES).optional().describe('Only users with this role'),
    status: z.enum(USER_STATUSES).optional().describe('Only users with this status'),
  })
  .prefault({});
export type TListUsersInput = z.infer<typeof ZListUsersInput>;

export const ZListUsersOutput = pageResponse('users', ZUserSummary);

export const ZCreateUserInput = z.strictObject({
  email: ZEmail,
  name: z
    .string()
    .trim()
    .min(1)
    .max(200)
    .optional()
    .describe('Display name; defaults to the part of the email before `@`'),
  role: z
    .enum(ASSIGNABLE_ROLES)
    .default('member')
    .describe('`member` (default) or `admin`; only the owner may create an admin'),
  permissions: ZPermissionList.default([]).describe(
    'Grants in addition to the role’s defaults (members: vpn:read, database:read, hosting:read). Nobody can grant ' +
      'a permission they do not hold.',
  ),
  send_invitation: z
    .boolean()
    .default(true)
    .describe(
      'true (default): the invitation is sent by mail. false: the response carries `invitation_url` to share.',
    ),
});
export type TCreateUserInput = z.infer<typeof ZCreateUserInput>;

export const ZCreateUserOutput = okResponse({
  user: ZUserDetail,
  invitation_url: z
    .string()
    .nullable()
    .describe(
      'With `send_invitation: false`: the link that activates the account (valid 7 days, single use). Null otherwise.',
    ),
});

export const ZUserIdInput = z.object({ id: ZUserId });

export const ZUserOutput = okResponse({ user: ZUserDetail });

export const ZUpdateUserInput = z.strictObject({
  id: ZUserId,
  name: z.string().trim().min(1).max(200).optional(),
  role: z
    .enum(ASSIGNABLE_ROLES)
    .optional()
    .describe(
      'Owner only for granting or revoking `admin`; the owner role cannot be given or taken here. Changing the role ' +
        'resets the permissions to the new role’s defaults unless `permissions` is sent too.',
    ),
  permissions: ZPermissionList.optional().describe(
    'The complete new permission set (replaces the current one). Nobody can grant a permission they do not hold.',
  ),
  status: z
    .enum(['active', 'suspended'])
    .optional()
    .describe(
      '`suspended` signs the user out everywhere and refuses their tokens; `active` lets them back in',
    ),
  profile: ZProfileInput.optional(),
});
export type TUpdateUserInput = z.infer<typeof ZUpdateUserInput>;

export const ZDeleteUserOutput = okResponse({
  message: z.string(),
  id: z.string(),
  email: z.string(),
  resources_transferred_to: z
    .string()
    .describe(
      'Id of the user (the caller) who now owns the removed user’s VPN connections, databases and sites',
    ),
});

const levelsPatch = (levels: readonly string[]) =>
  z.strictObject(Object.fromEntries(levels.map((l) => [l, z.boolean().optional()])));

export const ZUpdatePermissionsInput = z.strictObject({
  id: ZUserId,
  permissions: z
    .strictObject(
      Object.fromEntries(
        OBJECT_FORM_RESOURCES.map((r) => [r, levelsPatch(OBJECT_FORM_LEVELS[r]).optional()]),
      ) as Record<(typeof OBJECT_FORM_RESOURCES)[number], z.ZodOptional<ReturnType<typeof levelsPatch>>>,
    )
    .describe(
      'Resource → booleans: `vpn`, `database`, `hosting` take `read`, `write`, `delete`; `billing` takes `read`, ' +
        '`write`. Absent resources and levels stay as they are. Setting a level to false also removes a ' +
        '`<resource>:admin` string grant; `users:*` grants are not affected.',
    ),
});
export type TUpdatePermissionsInput = z.infer<typeof ZUpdatePermissionsInput>;

export const ZPermissionsOutput = okResponse({
  user_id: z.string(),
  permissions: ZPermissionObject,
});

export const ZAcceptInvitationInput = z.strictObject({
  token: z.string().min(1).max(256).describe('The `token` of the invitation link'),
  password: ZNewPassword,
});
export type TAcceptInvitationInput = z.infer<typeof ZAcceptInvitationInput>;

export const ZAcceptInvitationOutput = okResponse({
  message: z.string(),
  user: ZUserSummary,
});
