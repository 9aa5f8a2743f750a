import { z } from 'zod';
import { SESSION_METHODS } from '../../access/session.entity.js';
import { ZUserSummary } from '../../access/user.dto.js';
import { okResponse, ZEmail, ZNewPassword, ZPassword, zPathId } from '../../lib/schema.js';

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
  token: z.string().describe('JWT access token, valid for `expires_in` seconds'),
  refresh_token: z.string().describe('`rt_…`, single use, valid 30 days'),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int().describe('Seconds until the access token expires (3600)'),
};

export const ZLoginOutput = okResponse({ ...tokenFields, user: ZUserSummary });
export type TLoginOutput = z.infer<typeof ZLoginOutput>;
export const ZRefreshOutput = okResponse(tokenFields);
export type TRefreshOutput = z.infer<typeof ZRefreshOutput>;
export const ZLogoutOutput = okResponse({ message: z.string() });
export const ZMeOutput = okResponse({ user: ZUserSummary });

// ---------- two-factor sign-in (docs/two-factor.md, "Two-factor sign-in") ----------

const ZTotpCode = z
  .string()
  .trim()
  .max(6, 'Must be the 6-digit code of the authenticator app')
  .regex(/^\d{6}$/, 'Must be the 6-digit code of the authenticator app')
  .describe('The 6-digit code the authenticator app shows now');
const ZRecoveryCode = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .describe('One of the recovery codes given when two-factor was enabled (each works once)');

/** With two-factor on, login answers this instead of tokens: complete it with `POST /auth/2fa/verify`. */
export const ZTwoFactorChallengeOutput = okResponse({
  two_factor_required: z.literal(true),
  challenge_token: z.string().describe('Give it to `POST /auth/2fa/verify` with a code, within `expires_in`'),
  expires_in: z.number().int().describe('Seconds the challenge stays valid (300)'),
}).meta({ id: 'TwoFactorChallenge' });
export type TTwoFactorChallengeOutput = z.infer<typeof ZTwoFactorChallengeOutput>;

/** The login body: the tokens, or (two-factor on) a challenge. */
export const ZLoginOrChallengeOutput = z.union([ZLoginOutput, ZTwoFactorChallengeOutput]);
export type TLoginOrChallengeOutput = z.infer<typeof ZLoginOrChallengeOutput>;

export const ZTwoFactorSetupOutput = okResponse({
  secret: z.string().describe('The TOTP secret, base32 (160 bits), for entering by hand'),
  otpauth_url: z.string().describe('`otpauth://totp/…` URL: what authenticator apps read from a QR code'),
  qr_code_svg: z.string().describe('The `otpauth_url` as a QR code, an SVG document'),
});
export type TTwoFactorSetupOutput = z.infer<typeof ZTwoFactorSetupOutput>;

export const ZTwoFactorEnableInput = z.strictObject({
  password: ZPassword.describe(
    'The caller’s password: a wrong one is 401 and counts towards the login throttle',
  ),
  code: ZTotpCode,
});
export type TTwoFactorEnableInput = z.infer<typeof ZTwoFactorEnableInput>;
export const ZTwoFactorEnableOutput = okResponse({
  recovery_codes: z
    .array(z.string())
    .describe('10 single-use codes for when the authenticator is lost; shown this once, stored hashed'),
});

export const ZTwoFactorDisableInput = z.strictObject({
  password: ZPassword,
  code: ZTotpCode.optional(),
  recovery_code: ZRecoveryCode.optional(),
});
export type TTwoFactorDisableInput = z.infer<typeof ZTwoFactorDisableInput>;
export const ZTwoFactorDisableOutput = okResponse({ message: z.string() });

export const ZTwoFactorVerifyInput = z.strictObject({
  challenge_token: z.string().min(1).max(512).describe('From the login response'),
  code: ZTotpCode.optional(),
  recovery_code: ZRecoveryCode.optional(),
});
export type TTwoFactorVerifyInput = z.infer<typeof ZTwoFactorVerifyInput>;

// ---------- password and sessions (docs/accounts-and-sessions.md, "Accounts and sessions") ----------

export const ZChangePasswordInput = z.strictObject({
  current_password: ZPassword.describe('The password now'),
  new_password: ZNewPassword,
});
export type TChangePasswordInput = z.infer<typeof ZChangePasswordInput>;
export const ZChangePasswordOutput = okResponse({
  message: z.string(),
  sessions_revoked: z.number().int().describe('How many other login sessions were signed out'),
});

export const ZRequestPasswordResetInput = z.strictObject({
  email: z.string().trim().min(1).max(320).describe('Email address of the account (case-insensitive)'),
});
export type TRequestPasswordResetInput = z.infer<typeof ZRequestPasswordResetInput>;
export const ZRequestPasswordResetOutput = okResponse({
  message: z
    .string()
    .describe('The same whether or not an account has this address: the answer tells nothing about it'),
});

export const ZConfirmPasswordResetInput = z.strictObject({
  token: z.string().min(1).max(512).describe('The `pwr_…` token of the mailed link'),
  new_password: ZNewPassword,
});
export type TConfirmPasswordResetInput = z.infer<typeof ZConfirmPasswordResetInput>;
export const ZConfirmPasswordResetOutput = okResponse({ message: z.string() });

export const ZLoginSession = z
  .object({
    id: z.string().describe('`ses_…`'),
    created_at: z.string().describe('When the session signed in'),
    last_used_at: z.string().describe('When tokens were last issued to it (sign-in or refresh)'),
    expires_at: z
      .string()
      .describe('When it ends unless refreshed before; never later than `SESSION_MAX_AGE` after sign-in'),
    ip: z.string().nullable().describe('Address it signed in from'),
    user_agent: z.string().nullable().describe('User agent it signed in with'),
    current: z.boolean().describe('Whether it is the session of the access token of this request'),
    method: z
      .enum(SESSION_METHODS)
      .describe('How it signed in: `password` (with or without a two-factor code) or `sso` (docs/sso.md)'),
  })
  .meta({ id: 'LoginSession' });
export type TLoginSession = z.infer<typeof ZLoginSession>;
export const ZListSessionsOutput = okResponse({
  sessions: z.array(ZLoginSession).describe('Live sessions (not revoked, not expired), newest first'),
  total: z.number().int(),
});

export const ZRevokeSessionInput = z.object({ id: zPathId('ses', 'Login session') });
export type TRevokeSessionInput = z.infer<typeof ZRevokeSessionInput>;
export const ZRevokeSessionOutput = okResponse({
  message: z.string(),
  id: z.string(),
});

export const ZRevokeAllSessionsInput = z.strictObject({
  keep_current: z
    .boolean()
    .default(false)
    .describe('true: keep the session of this request signed in; false (default): sign it out too'),
});
export type TRevokeAllSessionsInput = z.infer<typeof ZRevokeAllSessionsInput>;
export const ZRevokeAllSessionsOutput = okResponse({
  message: z.string(),
  revoked: z.number().int().describe('How many sessions were signed out'),
});
