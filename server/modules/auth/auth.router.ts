import { router } from '../../trpc/init.js';
import { authEndpointProcedure, authedAuthEndpointProcedure } from '../../trpc/procedures.js';
import {
  ZChangePasswordInput,
  ZChangePasswordOutput,
  ZConfirmPasswordResetInput,
  ZConfirmPasswordResetOutput,
  ZListSessionsOutput,
  ZRequestPasswordResetInput,
  ZRequestPasswordResetOutput,
  ZRevokeAllSessionsInput,
  ZRevokeAllSessionsOutput,
  ZRevokeSessionInput,
  ZRevokeSessionOutput,
  ZLoginInput,
  ZLoginOrChallengeOutput,
  ZLoginOutput,
  ZLogoutOutput,
  ZMeOutput,
  ZRefreshInput,
  ZRefreshOutput,
  ZRegisterInput,
  ZTwoFactorDisableInput,
  ZTwoFactorDisableOutput,
  ZTwoFactorEnableInput,
  ZTwoFactorEnableOutput,
  ZTwoFactorSetupOutput,
  ZTwoFactorVerifyInput,
} from './auth.schema.js';
import * as twoFactor from './two-factor.service.js';
import * as auth from './auth.service.js';
import * as password from './password.service.js';
import * as sessions from './sessions.service.js';
import { ZEmptyInput, ZNoQuery } from '../../lib/schema.js';

const tags = ['Authentication'];

export const authRouter = router({
  login: authEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/login',
        tags,
        summary: 'Log in with email and password',
        description:
          'Answers the token pair and the user. For a user with two-factor sign-in on, answers instead ' +
          '`{two_factor_required: true, challenge_token, expires_in}`: complete it with `POST /auth/2fa/verify`. ' +
          'A wrong email or password is 401 `INVALID_CREDENTIALS`; after 10 failures for one email and address ' +
          'within 15 minutes, attempts are refused for 15 minutes with 429 `TOO_MANY_LOGIN_ATTEMPTS` and ' +
          '`Retry-After`. Where the organization enforces single sign-on, its users but the owner are refused ' +
          'with 403 `SSO_REQUIRED` (sign in with `POST /auth/sso/start`): at once for an address of its verified ' +
          'domains, else after a right password; the owner’s password login still works and is audited as ' +
          '`auth.sso_break_glass`.',
        protect: false,
      },
      errors: {
        INVALID_CREDENTIALS: 'Wrong email or password',
        SSO_REQUIRED: 'The organization enforces single sign-on: sign in with `POST /auth/sso/start`',
        TOO_MANY_LOGIN_ATTEMPTS:
          'Too many failed attempts for this email from this address; see `Retry-After`',
      },
    })
    .input(ZLoginInput)
    .output(ZLoginOrChallengeOutput)
    .mutation(({ ctx, input }) => auth.login(ctx, input)),

  register: authEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/register',
        tags,
        summary: 'Create an organization and its owner',
        description:
          'Creates an organization on the `starter` plan with the caller as its owner, and logs in. An email ' +
          'already used by a user → 409 `CONFLICT`; on a server with sign-up disabled → 403 `FORBIDDEN`.',
        protect: false,
      },
      errors: {
        CONFLICT: 'A user with this email already exists',
        FORBIDDEN: 'Sign-up is disabled on this server',
      },
      successStatus: 201,
      location: '/users/{user.id}',
    })
    .input(ZRegisterInput)
    .output(ZLoginOutput)
    .mutation(({ ctx, input }) => auth.register(ctx, input)),

  refresh: authEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/refresh',
        tags,
        summary: 'Exchange a refresh token for a new token pair',
        description:
          'Refresh tokens rotate on every use. Presenting one that was already used (a second, concurrent use included: exactly one of them wins) revokes every token of its login session. An unknown, used, revoked or expired refresh token → 401 `INVALID_CREDENTIALS`.',
        protect: false,
      },
      errors: { INVALID_CREDENTIALS: 'Unknown, already used, revoked or expired refresh token' },
    })
    .input(ZRefreshInput)
    .output(ZRefreshOutput)
    .mutation(({ ctx, input }) => auth.refresh(ctx, input)),

  logout: authedAuthEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/logout',
        tags,
        summary: 'Revoke the current access token and its refresh token',
        description:
          'Ends the login session of the access token sent: it and its refresh token stop working at once. Other ' +
          'sessions of the user are not affected. The body may be empty or `{}`.',
      },
    })
    .input(ZEmptyInput)
    .output(ZLogoutOutput)
    .mutation(({ ctx }) => auth.logout(ctx)),

  me: authedAuthEndpointProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/auth/me',
        tags,
        summary: 'The authenticated user',
        description:
          'The user the access token belongs to, with their organization, role and effective permissions (the ' +
          'role’s defaults plus their grants).',
      },
    })
    .input(ZNoQuery.optional())
    .output(ZMeOutput)
    .query(({ ctx }) => auth.me(ctx)),

  password: router({
    change: authedAuthEndpointProcedure
      .meta({
        openapi: {
          method: 'POST',
          path: '/auth/password',
          tags,
          summary: 'Change the password',
          description:
            'With the current password. Every other login session of the user is signed out (their access and ' +
            'refresh tokens answer 401 from the next call); the session of this request stays. Unused ' +
            'password-reset links stop working. A wrong current password is 401 `INVALID_CREDENTIALS` and counts ' +
            'towards the login throttle. Emits `user.updated`. Not with an API key.',
        },
        errors: {
          INVALID_CREDENTIALS: 'Wrong current password',
          TOO_MANY_LOGIN_ATTEMPTS: 'Too many failed attempts (the login throttle); see `Retry-After`',
        },
        // The password checks (bcrypt) must not hold a transaction open.
        idempotency: 'after-commit',
      })
      .input(ZChangePasswordInput)
      .output(ZChangePasswordOutput)
      .mutation(({ ctx, input }) => password.changePassword(ctx, input)),

    requestReset: authEndpointProcedure
      .meta({
        openapi: {
          method: 'POST',
          path: '/auth/password-reset',
          tags,
          summary: 'Mail a link to reset a forgotten password',
          description:
            'Always 202 with the same body, whether or not an account has this address. An active account with a ' +
            'password gets a mail with a single-use link (`<PUBLIC_BASE_URL>/reset-password?token=pwr_…`) valid for ' +
            '`PASSWORD_RESET_TTL` (30 minutes by default); at most one mail a minute per account. Complete it with ' +
            '`POST /auth/password-reset/confirm`. No mail goes to a user (but the owner) of an organization that ' +
            'enforces single sign-on.',
          protect: false,
        },
        successStatus: 202,
      })
      .input(ZRequestPasswordResetInput)
      .output(ZRequestPasswordResetOutput)
      .mutation(({ ctx, input }) => password.requestPasswordReset(ctx, input)),

    confirmReset: authEndpointProcedure
      .meta({
        openapi: {
          method: 'POST',
          path: '/auth/password-reset/confirm',
          tags,
          summary: 'Choose a new password with a mailed reset token',
          description:
            'Sets the password, uses the token up and signs out every login session of the account (log in ' +
            'again; two-factor sign-in, when on, still asks for its code). An unknown, used or expired token is ' +
            '401 `INVALID_CREDENTIALS`. Emits `user.updated`.',
          protect: false,
        },
        errors: {
          INVALID_CREDENTIALS: 'Unknown, used or expired reset token',
          SSO_REQUIRED: 'The organization enforces single sign-on: its users but the owner have no password',
        },
        idempotency: 'after-commit',
      })
      .input(ZConfirmPasswordResetInput)
      .output(ZConfirmPasswordResetOutput)
      .mutation(({ ctx, input }) => password.confirmPasswordReset(ctx, input)),
  }),

  sessions: router({
    list: authedAuthEndpointProcedure
      .meta({
        openapi: {
          method: 'GET',
          path: '/auth/sessions',
          tags,
          summary: 'The caller’s login sessions',
          description:
            'Every live login session of the user (not revoked, not expired), newest first: where and with what ' +
            'it signed in, when it was last used, when it ends, and which one is this request’s (`current`). ' +
            'Not with an API key.',
        },
      })
      .input(ZNoQuery.optional())
      .output(ZListSessionsOutput)
      .query(({ ctx }) => sessions.listSessions(ctx)),

    revoke: authedAuthEndpointProcedure
      .meta({
        openapi: {
          method: 'DELETE',
          path: '/auth/sessions/{id}',
          tags,
          summary: 'Sign out one login session',
          description:
            'Its access and refresh tokens answer 401 from the next call. Another user’s session, or one already ' +
            'revoked or expired, is 404.',
        },
      })
      .input(ZRevokeSessionInput)
      .output(ZRevokeSessionOutput)
      .mutation(({ ctx, input }) => sessions.revokeSession(ctx, input.id)),

    revokeAll: authedAuthEndpointProcedure
      .meta({
        openapi: {
          method: 'POST',
          path: '/auth/sessions/revoke-all',
          tags,
          summary: 'Sign out everywhere',
          description:
            'Revokes every login session of the user, this one included; with `{"keep_current": true}` every one ' +
            'but this request’s. The body may be empty or `{}`.',
        },
      })
      .input(ZRevokeAllSessionsInput)
      .output(ZRevokeAllSessionsOutput)
      .mutation(({ ctx, input }) => sessions.revokeAllSessions(ctx, input)),
  }),

  twoFactor: router({
    setup: authedAuthEndpointProcedure
      .meta({
        openapi: {
          method: 'POST',
          path: '/auth/2fa/setup',
          tags,
          summary: 'Start enrolling two-factor sign-in (TOTP)',
          description:
            'A new TOTP secret (SHA-1, 6 digits, 30 s) with its `otpauth://` URL and a QR code to scan. It is ' +
            'pending until `POST /auth/2fa/enable` confirms a code of it; calling setup again replaces it. 409 when ' +
            'two-factor is already on; 403 `SSO_REQUIRED` for a user (but the owner) of an organization that ' +
            'enforces single sign-on.',
        },
        errors: {
          CONFLICT: 'Two-factor sign-in is already enabled',
          SSO_REQUIRED: 'The organization enforces single sign-on: its identity provider signs its users in',
        },
      })
      .input(ZEmptyInput)
      .output(ZTwoFactorSetupOutput)
      .mutation(({ ctx }) => twoFactor.setup(ctx)),

    enable: authedAuthEndpointProcedure
      .meta({
        openapi: {
          method: 'POST',
          path: '/auth/2fa/enable',
          tags,
          summary: 'Turn two-factor sign-in on with a first code',
          description:
            'Needs the caller’s `password` (a wrong one is 401 `INVALID_CREDENTIALS` and counts towards the login ' +
            'throttle: after 10 failures, 429 for 15 minutes even with the right one), then confirms the pending ' +
            'secret with a code of the authenticator app (a wrong code is 400) and returns 10 single-use recovery ' +
            'codes, shown this once. From then on login answers a challenge (see `POST /auth/2fa/verify`). Emits ' +
            '`user.updated`.',
        },
        errors: {
          CONFLICT: 'Already enabled, or no pending setup',
          SSO_REQUIRED: 'The organization enforces single sign-on: its identity provider signs its users in',
          INVALID_CREDENTIALS: 'Wrong password',
          TOO_MANY_LOGIN_ATTEMPTS: 'Too many failed attempts (the login throttle); see `Retry-After`',
        },
        // The password check (bcrypt) must not hold a transaction open.
        idempotency: 'after-commit',
      })
      .input(ZTwoFactorEnableInput)
      .output(ZTwoFactorEnableOutput)
      .mutation(({ ctx, input }) => twoFactor.enable(ctx, input)),

    disable: authedAuthEndpointProcedure
      .meta({
        openapi: {
          method: 'POST',
          path: '/auth/2fa/disable',
          tags,
          summary: 'Turn two-factor sign-in off',
          description:
            'Needs the password and a current code (or a recovery code); a wrong one is 401 ' +
            '`INVALID_CREDENTIALS` and counts towards the login throttle. Emits `user.updated`.',
        },
        errors: {
          CONFLICT: 'Two-factor sign-in is not enabled',
          INVALID_CREDENTIALS: 'Wrong password or code',
          TOO_MANY_LOGIN_ATTEMPTS: 'Too many failed attempts (the login throttle); see `Retry-After`',
        },
        // The password check (bcrypt) must not hold a transaction open.
        idempotency: 'after-commit',
      })
      .input(ZTwoFactorDisableInput)
      .output(ZTwoFactorDisableOutput)
      .mutation(({ ctx, input }) => twoFactor.disable(ctx, input)),

    verify: authEndpointProcedure
      .meta({
        openapi: {
          method: 'POST',
          path: '/auth/2fa/verify',
          tags,
          summary: 'Complete a sign-in with the two-factor code',
          description:
            'With the `challenge_token` of the login response and a code of the authenticator app (or a recovery ' +
            'code, each usable once), answers the login body with the tokens and emits `user.login`. A code is ' +
            'accepted once: a code of the last accepted time step or an earlier one is refused. A wrong code is 401 ' +
            '`INVALID_CREDENTIALS`; five wrong codes void the challenge (sign in again); the challenge expires ' +
            'after 5 minutes.',
          protect: false,
        },
        errors: {
          INVALID_CREDENTIALS: 'Wrong code, or an unknown, expired or voided challenge',
          SSO_REQUIRED: 'The organization enforces single sign-on since the password was given',
          TOO_MANY_LOGIN_ATTEMPTS: 'Too many failed attempts (the login throttle); see `Retry-After`',
        },
      })
      .input(ZTwoFactorVerifyInput)
      .output(ZLoginOutput)
      .mutation(({ ctx, input }) => twoFactor.verify(ctx, input)),
  }),
});
