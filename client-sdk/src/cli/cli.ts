import type { Command } from 'commander';
import { createClient, type ClientOptions, type PlatformClient } from '@cloud-platform/client';
import { loadCredentials, saveCredentials, type StoredCredentials } from './credentials.js';
import { CliError, EXIT } from './exit-codes.js';
import { ask, Progress, readStdin, terminalSafeJson, writeErr, writeOut } from './output.js';

/** The API the CLI talks to when neither `--api-url`, `CLOUD_API_URL` nor a login names one. */
export const DEFAULT_API_URL = 'http://127.0.0.1:3000';
export const API_URL_VARIABLE = 'CLOUD_API_URL';
/** An API key in this variable is used instead of the stored login (for scripts and CI). */
export const API_KEY_VARIABLE = 'CLOUD_API_KEY';

/**
 * The client options for an API key from the environment: the SDK's `apiKey`, sent as the bearer token of every
 * call and never refreshed (a key is not a session).
 */
export function clientOptionsForApiKey(baseUrl: string, apiKey: string): ClientOptions {
  return { baseUrl, apiKey };
}

interface GlobalOptions {
  json?: boolean;
  apiUrl?: string;
}

export interface WaitOptions<T> {
  /** Fetches the current state. */
  poll: () => Promise<T>;
  /** The progress line for a state. */
  describe: (state: T) => string;
  /** True once the wait is over (successfully or not). */
  done: (state: T) => boolean;
  /** Seconds before giving up (exit 1). */
  timeoutSeconds?: number;
}

/** What every command gets: the global options, the signed-in client, output and waiting helpers. */
export class Cli {
  #client: PlatformClient | undefined;

  constructor(
    private readonly program: Command,
    readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  get #options(): GlobalOptions {
    return this.program.opts<GlobalOptions>();
  }

  /** `--json`: print the API's answer as JSON on stdout, nothing else there. */
  get json(): boolean {
    return Boolean(this.#options.json);
  }

  /** True when the commands run with the API key in `CLOUD_API_KEY` rather than the stored login. */
  get usingApiKey(): boolean {
    return Boolean(this.env[API_KEY_VARIABLE]);
  }

  /** `--api-url`, else `CLOUD_API_URL`, else the API of the stored login, else {@link DEFAULT_API_URL}. */
  apiUrl(stored: StoredCredentials | undefined = loadCredentials()): string {
    return this.#options.apiUrl ?? this.env[API_URL_VARIABLE] ?? stored?.api_url ?? DEFAULT_API_URL;
  }

  /** An anonymous client (login). */
  anonymousClient(options: Partial<ClientOptions> = {}): PlatformClient {
    return createClient({ baseUrl: this.apiUrl(), ...options });
  }

  /**
   * The client of the API key in `CLOUD_API_KEY`, else of the stored login (its refreshed tokens are saved again).
   * Not signed in → exit 3.
   */
  client(): PlatformClient {
    if (this.#client) return this.#client;
    const apiKey = this.env[API_KEY_VARIABLE];
    if (apiKey) {
      this.#client = createClient(clientOptionsForApiKey(this.apiUrl(), apiKey));
      return this.#client;
    }
    const stored = loadCredentials();
    if (!stored) {
      throw new CliError(`not signed in: run \`cloud login\` (or set ${API_KEY_VARIABLE})`, EXIT.AUTH);
    }
    this.#client = createClient({
      baseUrl: this.apiUrl(stored),
      token: stored.token,
      ...(stored.refresh_token ? { refreshToken: stored.refresh_token } : {}),
      onTokens: (tokens) =>
        saveCredentials({ ...stored, token: tokens.token, refresh_token: tokens.refreshToken }),
    });
    return this.#client;
  }

  /** Prints `data` as JSON with `--json`, else the human-readable text. */
  print(data: unknown, human: () => string): void {
    if (this.json) process.stdout.write(`${terminalSafeJson(JSON.stringify(data, null, 2))}\n`);
    else writeOut(`${human()}\n`);
  }

  /** A message for the person at the terminal (stderr, so that stdout stays the command's output). */
  note(message: string): void {
    writeErr(`${message}\n`);
  }

  /**
   * Asks before something that cannot be undone: on a terminal `question` must be answered yes (else exit 1,
   * nothing done); elsewhere `--yes` is required (else exit 2), so that a script never acts on an unasked question.
   */
  async confirm(
    question: string | (() => Promise<string>),
    yes: boolean | undefined,
    what: string,
  ): Promise<void> {
    if (yes) return;
    if (!process.stdin.isTTY) throw new CliError(`${what} needs a confirmation: pass --yes`, EXIT.USAGE);
    const answer = await ask(`${typeof question === 'string' ? question : await question()} [y/N] `);
    if (!/^y(es)?$/i.test(answer)) throw new CliError('cancelled: nothing was changed', EXIT.FAILURE);
  }

  /**
   * The signed-in user's password: all of standard input with `--password-stdin`, else asked without echo on a
   * terminal; elsewhere a usage error (exit 2).
   */
  async password(passwordStdin: boolean | undefined, prompt = 'Password: '): Promise<string> {
    const password = passwordStdin
      ? await readStdin()
      : process.stdin.isTTY
        ? await ask(prompt, { hidden: true })
        : undefined;
    if (!password)
      throw new CliError('no password: give it on standard input with --password-stdin', EXIT.USAGE);
    return password;
  }

  /** Polls until `done`, showing a progress line; returns the last state. */
  async waitFor<T>(options: WaitOptions<T>): Promise<T> {
    const progress = new Progress();
    const deadline = Date.now() + (options.timeoutSeconds ?? 600) * 1000;
    try {
      for (;;) {
        const state = await options.poll();
        if (options.done(state)) return state;
        progress.update(options.describe(state));
        if (Date.now() > deadline) {
          throw new CliError(
            `gave up waiting after ${options.timeoutSeconds ?? 600}s: ${options.describe(state)}`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
      }
    } finally {
      progress.stop();
    }
  }
}

const POLL_INTERVAL_MS = 500;

/** Parses `--timeout` and other whole-number options; bad values are usage errors. */
export function positiveInteger(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new CliError(`not a positive whole number: ${value}`, EXIT.USAGE);
  return n;
}

/** Parses time options: an ISO 8601 time, or a duration back from now (`90m`, `12h`, `3d`). */
export function timeOption(value: string): string {
  const ago = /^(\d+)([mhd])$/.exec(value);
  if (ago) {
    const unit = { m: 60_000, h: 3_600_000, d: 86_400_000 }[ago[2] as 'm' | 'h' | 'd'];
    return new Date(Date.now() - Number(ago[1]) * unit).toISOString();
  }
  if (Number.isNaN(Date.parse(value))) {
    throw new CliError(`not a time: ${value} (an ISO 8601 time, or 90m, 12h, 3d ago)`, EXIT.USAGE);
  }
  return value;
}
