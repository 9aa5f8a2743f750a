import { PlatformApiError } from '@cloud-platform/client';

/** The exit status of every command (client-sdk/README.md, "Exit codes"). */
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

/**
 * One line for any error: the message, the API's code and the request id to quote to support. `apiKeyVariable`
 * names the environment variable whose API key made the call, if one did: a 403 then says what the key cannot do.
 */
export function describeError(
  error: unknown,
  context: { apiKeyVariable?: string } = {},
): { line: string; exitCode: ExitCode } {
  if (error instanceof CliError) return { line: `error: ${error.message}`, exitCode: error.exitCode };
  if (error instanceof PlatformApiError) {
    const first: Record<string, unknown> | undefined = error.details?.[0];
    const detail =
      typeof first?.path === 'string' && typeof first.message === 'string'
        ? ` (${first.path}: ${first.message})`
        : '';
    const tags = [error.code, error.requestId ? `request ${error.requestId}` : undefined].filter(Boolean);
    const retry =
      'retryAfter' in error && typeof error.retryAfter === 'number' ? `; retry in ${error.retryAfter}s` : '';
    const hint =
      error.status === 403 && context.apiKeyVariable ? `; ${apiKeyHint(error, context.apiKeyVariable)}` : '';
    return {
      line: `error: ${oneLine(error.message)}${detail} [${tags.join(', ')}]${retry}${hint}`,
      exitCode: exitCodeFor(error),
    };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { line: `error: ${oneLine(message)}`, exitCode: EXIT.FAILURE };
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
