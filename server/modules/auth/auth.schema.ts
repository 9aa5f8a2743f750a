import { z } from 'zod';
import { ZUserSummary } from '../../access/user.dto.js';
import { ZEmail, ZNewPassword, ZPassword } from '../../lib/schema.js';

export const ZLoginInput = z.strictObject({
  email: z.string().trim().min(1).max(320).describe('Email address (case-insensitive)'),
  password: ZPassword,
});
export type TLoginInput = z.infer<typeof ZLoginInput>;

export const ZRegisterInput = z.strictObject({
  email: ZEmail,
  password: ZNewPassword,
  name: z.string().trim().min(1).max(200),
  organization_name: z.string().trim().min(1).max(200),
});
export type TRegisterInput = z.infer<typeof ZRegisterInput>;

export const ZRefreshInput = z.strictObject({
  refresh_token: z.string().min(1).max(512).describe('The `rt_…` token from login or the previous refresh'),
});
export type TRefreshInput = z.infer<typeof ZRefreshInput>;

const tokenFields = {
  success: z.literal(true),
  token: z.string().describe('JWT access token, valid for `expires_in` seconds'),
  refresh_token: z.string().describe('`rt_…`, single use, valid 30 days'),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int().describe('Seconds until the access token expires (3600)'),
};

export const ZLoginOutput = z.object({ ...tokenFields, user: ZUserSummary });
export type TLoginOutput = z.infer<typeof ZLoginOutput>;
export const ZRefreshOutput = z.object(tokenFields);
export type TRefreshOutput = z.infer<typeof ZRefreshOutput>;
export const ZLogoutOutput = z.object({ success: z.literal(true), message: z.string() });
export const ZMeOutput = z.object({ success: z.literal(true), user: ZUserSummary });
