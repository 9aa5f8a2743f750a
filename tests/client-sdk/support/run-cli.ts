import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** The CLI's entry point, run from source (the package's source condition resolves `@cloud-platform/client`). */
export const CLI_MAIN = resolve(import.meta.dirname, '../../../client-sdk/src/cli/main.ts');
const TSX = import.meta.resolve('tsx');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The lines a run wrote to stderr (a failure must write exactly one). */
export const stderrLines = (run: CliRun) => run.stderr.split('\n').filter((l) => l.length > 0);

/**
 * A user's terminal: its own config directory (XDG_CONFIG_HOME) and working directory, the API address in
 * CLOUD_API_URL, no API key unless given.
 */
export class Terminal {
  readonly home = mkdtempSync(join(tmpdir(), 'cloud-cli-'));
  readonly configHome = join(this.home, 'config');
  readonly env: NodeJS.ProcessEnv;

  constructor(apiUrl: string, env: Record<string, string> = {}) {
    const inherited = { ...process.env };
    delete inherited.CLOUD_API_KEY;
    delete inherited.CLOUD_API_URL;
    this.env = {
      ...inherited,
      XDG_CONFIG_HOME: this.configHome,
      CLOUD_API_URL: apiUrl,
      NO_COLOR: '1',
      ...env,
    };
  }

  /** Runs `cloud <args>` as a subprocess, with `input` on its standard input (closed right away otherwise). */
  run(args: string[], options: { input?: string; env?: Record<string, string> } = {}): Promise<CliRun> {
    return runNode(['--import', TSX, '--conditions=@cloud-platform/source', CLI_MAIN, ...args], {
      cwd: this.home,
      env: { ...this.env, ...options.env },
      input: options.input,
    });
  }
}

export function runNode(
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; input?: string | undefined; command?: string },
): Promise<CliRun> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(options.command ?? process.execPath, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}
