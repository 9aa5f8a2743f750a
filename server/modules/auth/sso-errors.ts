/**
 * Why a single sign-on did not complete (docs/sso.md): the code the callback and the ACS send back to `return_to`
 * (`?error=<code>&error_description=<message>`) or show on their page. These are not API errors: the IdP's
 * browser redirect carries them, never the `/v1` envelope.
 */
export const SSO_FAILURE_CODES = [
  'SSO_STATE_INVALID',
  'SSO_ASSERTION_INVALID',
  'SSO_EMAIL_NOT_VERIFIED',
  'SSO_DOMAIN_NOT_ALLOWED',
  'SSO_USER_DISABLED',
  'SSO_EMAIL_TAKEN',
  'SSO_IDP_ERROR',
] as const;
export type SsoFailureCode = (typeof SSO_FAILURE_CODES)[number];

/** The HTTP status of the page that shows a failure when the sign-in has no `return_to`. */
export const SSO_FAILURE_STATUS: Record<SsoFailureCode, 400 | 401 | 403> = {
  SSO_STATE_INVALID: 400,
  SSO_ASSERTION_INVALID: 401,
  SSO_EMAIL_NOT_VERIFIED: 403,
  SSO_DOMAIN_NOT_ALLOWED: 403,
  SSO_USER_DISABLED: 403,
  SSO_EMAIL_TAKEN: 403,
  SSO_IDP_ERROR: 400,
};

/** A sign-in through the IdP that failed a check; `message` is shown to the person signing in. */
export class SsoFailure extends Error {
  constructor(
    readonly code: SsoFailureCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'SsoFailure';
  }
}

export function isSsoFailure(err: unknown): err is SsoFailure {
  return err instanceof SsoFailure;
}
