import { PlatformApiError } from '@cloud-platform/client';

/** The exit status of every command (client-sdk/README.md, "Command-line client"). */
export const EXIT = {
  OK: 0,
  /** The request failed for another reason, or what `--wait`/`--follow` waited for ended badly (a failed build). */
  FAILURE: 1,
  /** Bad usage: unknown command or option, missing argument, invalid value (including the API's 400). */
  USAGE: 2,
  /** Not signed in, wrong credentials, expired session, or not allowed (401, 403). */
  AUTH: 3,
  /** No such resource (404). */
  NOT_FOUND: 4,
  /** Refused in the current state: conflict, plan limit, payment declined (402, 409, 422). */
  REFUSED: 5,
  /** Try again later: rate limited, service unavailable, server error, or the API unreachable (429, 5xx, network). */
  UNAVAILABLE: 6,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error of the CLI itself (not of the API): printed as one line, then the process exits with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode = EXIT.FAILURE,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export function exitCodeFor(error: PlatformApiError): ExitCode {
  const { status } = error;
  if (status === 400 || status === 413 || status === 415) return EXIT.USAGE;
  if (status === 401 || status === 403) return EXIT.AUTH;
  if (status === 404) return EXIT.NOT_FOUND;
  if (status === 402 || status === 409 || status === 422) return EXIT.REFUSED;
  if (status === 0 || status === 429 || status >= 500) return EXIT.UNAVAILABLE;
  return EXIT.FAILURE;
}

/** What the CLI knows about the failed run, for the hint. */
export interface ErrorContext {
  /** The environment variable whose API key made the call, if one did. */
  apiKeyVariable?: string;
  /** The words of the command that ran (`['databases', 'show']`). */
  command?: readonly string[];
  /** The command that lists what the failed command works on (`cloud databases list`), if there is one. */
  listCommand?: string;
}

/**
 * One line for any error (the message, the API's code and the request id to quote to support), and for the common
 * ones a hint: what to do next, as a command (docs/cli.md, "Errors and hints").
 */
export function describeError(
  error: unknown,
  context: ErrorContext = {},
): { line: string; hint?: string; exitCode: ExitCode } {
  if (error instanceof CliError) return { line: `error: ${error.message}`, exitCode: error.exitCode };
  if (error instanceof PlatformApiError) {
    const first: Record<string, unknown> | undefined = error.details?.[0];
    const detail =
      typeof first?.path === 'string' &&
      typeof first.message === 'string' &&
      !error.message.includes(first.message)
        ? ` (${first.path}: ${first.message})`
        : '';
    const tags = [error.code, error.requestId ? `request ${error.requestId}` : undefined].filter(Boolean);
    const retry =
      'retryAfter' in error && typeof error.retryAfter === 'number' ? `; retry in ${error.retryAfter}s` : '';
    const hint = hintFor(error, context);
    return {
      line: `error: ${oneLine(error.message)}${detail} [${tags.join(', ')}]${retry}`,
      ...(hint ? { hint } : {}),
      exitCode: exitCodeFor(error),
    };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { line: `error: ${oneLine(message)}`, exitCode: EXIT.FAILURE };
}

/** The next step for the common errors; undefined where the message says it all. */
function hintFor(error: PlatformApiError, context: ErrorContext): string | undefined {
  const key = context.apiKeyVariable;
  const command = context.command?.length ? `cloud ${context.command.join(' ')}` : 'cloud <command>';
  switch (error.code) {
    case 'UNAUTHORIZED':
    case 'TOKEN_EXPIRED':
      return key
        ? `the API key in ${key} is not valid (mistyped, revoked or expired): create one with \`cloud api-keys create\`, or unset ${key} to use your \`cloud login\``
        : 'sign in again: `cloud login`';
    case 'INVALID_CREDENTIALS':
      return context.command?.[0] === 'login'
        ? 'check the email and the password; forgotten it? `cloud password reset --email <email>`'
        : 'check what you typed (password, code or token) and run the command again';
    case 'SSO_REQUIRED':
      return 'your organization signs you in through its identity provider: `cloud login --sso <email>`';
    case 'TWO_FACTOR_REQUIRED':
      return 'your organization requires two-factor sign-in: `cloud two-factor setup`, then `cloud two-factor enable --code <code>`';
    case 'IP_NOT_ALLOWED':
      return 'your organization does not accept requests from this address: use an allowed network, or ask the owner (`cloud organization security set --allow <cidr>`)';
    case 'FORBIDDEN':
      if (key) return apiKeyHint(error, key);
      return 'your role does not allow this: ask an owner or an admin of the organization (`cloud users list` shows them)';
    case 'NOT_FOUND':
      return context.listCommand
        ? `check the id: \`${context.listCommand}\` lists the ones you can see`
        : 'check the id: it must be one of your organization';
    case 'PLAN_LIMIT_EXCEEDED':
      return 'delete one, or upgrade the plan: `cloud billing plans`, then `cloud billing change <plan>`';
    case 'QUOTA_EXCEEDED':
      return 'the plan’s monthly API quota is used up: upgrade with `cloud billing change <plan>`, or wait for the next period';
    case 'PAYMENT_FAILED':
      return 'the card was declined: add another one with `cloud billing card-add <token> --default`, then try again';
    case 'CONFLICT':
      return context.listCommand
        ? `the current state does not allow this: see it with \`${context.listCommand}\`, then try again`
        : 'the current state does not allow this: look at it again, then try again';
    case 'VALIDATION_ERROR':
      return `see the accepted values: \`${command} --help\``;
    case 'RATE_LIMITED':
    case 'TOO_MANY_LOGIN_ATTEMPTS':
      return 'wait for the time given, then run the command again';
    case 'CONNECTION_ERROR':
      return 'is the API running at that address? Set it with --api-url or CLOUD_API_URL';
    default:
      return error.status >= 500
        ? 'try again in a moment; if it goes on, quote the request id to support'
        : undefined;
  }
}

/**
 * Why the API key was refused: identity, key, user, webhook and audit operations are closed to every key (unset the
 * variable to use the stored login); anything else needs a permission the key does not list or its creator lost.
 */
function apiKeyHint(error: PlatformApiError, variable: string): string {
  return /API key/i.test(error.message)
    ? `the API key in ${variable} cannot do this: unset ${variable} to use your \`cloud login\``
    : `the API key in ${variable} does not allow this: create a key with the permission (\`cloud api-keys create\`)`;
}

const oneLine = (text: string) => text.replace(/\s*\n\s*/g, ' ').trim();
