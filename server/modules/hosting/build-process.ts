import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { LogStream } from './hosting.constants.js';

/**
 * Runs one command of a real build (git, the install, the build command) as a process group of its own, line by
 * line, with a wall-time limit, an output limit and cancellation that kills the whole tree at once
 * (docs/hosting.md, "The sandbox").
 */

/** Longest line kept whole; longer ones are cut (after masking, so a secret is never split across lines). */
const MAX_LINE = 4096;

export interface SandboxSpec {
  /** The only writable directory (the build's own). */
  buildDir: string;
  /** Directories hidden behind an empty tmpfs (the API's data, the artifact store, other builds). */
  hideDirs: string[];
  /** Files hidden behind /dev/null (configuration and secret files). */
  hideFiles: string[];
  /** Most processes at once (RLIMIT_NPROC). */
  maxProcesses: number;
  /** Largest file the build may write (RLIMIT_FSIZE). */
  maxFileBytes: number;
}

export interface RunOptions {
  argv: string[];
  cwd: string;
  /** The whole environment of the command: nothing of the server's own is inherited. */
  env: Record<string, string>;
  /** Run inside bubblewrap; undefined runs the command as it is (git on the host, `BUILD_SANDBOX=none`). */
  sandbox?: SandboxSpec;
  timeoutMs: number;
  signal: AbortSignal;
  /** Each line of output, already masked. */
  onLine(stream: LogStream, line: string): void;
  /** Output (bytes) allowed before the command is killed. */
  maxOutputBytes: number;
  mask: (s: string) => string;
}

export interface RunResult {
  code: number | null;
  outcome: 'exited' | 'timed-out' | 'canceled' | 'output-limit' | 'spawn-failed';
}

const NOBODY = 65534;

/** Whether bubblewrap can be run here (checked once per process). */
let bwrapChecked: boolean | undefined;
export function bubblewrapAvailable(): boolean {
  bwrapChecked ??= spawnSync('bwrap', ['--version'], { stdio: 'ignore' }).status === 0;
  return bwrapChecked;
}

/** PATH inside a build: the Node.js that runs the API first (its npm next to it when present), then the system's. */
export function buildPath(): string {
  const nodeDir = dirname(process.execPath);
  return [nodeDir, '/usr/local/bin', '/usr/bin', '/bin'].join(':');
}

/**
 * The bubblewrap command line: read-only system, fresh /dev, /proc of its own PID namespace (no other process is
 * visible, the API's `/proc/<pid>/environ` included), private /tmp, /run hidden (database sockets), the API's data,
 * configuration and the other builds hidden, no network, the build directory the only writable place, run as
 * `nobody`, and limits on processes and file size.
 */
export function bwrapArgs(spec: SandboxSpec, cwd: string, argv: string[]): string[] {
  const args = [
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--tmpfs',
    '/tmp',
    '--tmpfs',
    '/run',
  ];
  for (const dir of spec.hideDirs) if (existsSync(dir)) args.push('--tmpfs', dir);
  for (const file of spec.hideFiles) if (existsSync(file)) args.push('--ro-bind', '/dev/null', file);
  args.push(
    '--bind',
    spec.buildDir,
    spec.buildDir,
    '--unshare-all',
    '--die-with-parent',
    '--uid',
    String(NOBODY),
    '--gid',
    String(NOBODY),
    '--chdir',
    cwd,
    '--',
    'prlimit',
    `--nproc=${spec.maxProcesses}`,
    `--fsize=${spec.maxFileBytes}`,
    '--core=0',
    '--',
    ...argv,
  );
  return args;
}

export function runBuildCommand(opts: RunOptions): Promise<RunResult> {
  const [cmd, args] = opts.sandbox
    ? ['bwrap', bwrapArgs(opts.sandbox, opts.cwd, opts.argv)]
    : [opts.argv[0]!, opts.argv.slice(1)];
  // As root, bubblewrap itself runs as nobody: its user namespace then maps to nobody outside too, so the build
  // cannot read root's files even where they are visible (as root, the namespace's user would be root outside).
  const asNobody = opts.sandbox && process.getuid?.() === 0 ? { uid: NOBODY, gid: NOBODY } : {};
  return new Promise<RunResult>((resolve) => {
    let outcome: RunResult['outcome'] = 'exited';
    let outputBytes = 0;
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env,
      // A process group of its own: a kill reaches every process the command started.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...asNobody,
    });
    const killTree = (why: RunResult['outcome']) => {
      if (outcome === 'exited') outcome = why;
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => killTree('timed-out'), opts.timeoutMs);
    const onAbort = () => killTree('canceled');
    if (opts.signal.aborted) onAbort();
    else opts.signal.addEventListener('abort', onAbort, { once: true });

    const reader = (stream: LogStream) => {
      let pending = '';
      const emit = (line: string) => {
        const masked = opts.mask(line.replace(/\r$/, ''));
        for (let i = 0; i < masked.length || i === 0; i += MAX_LINE) {
          opts.onLine(stream, masked.slice(i, i + MAX_LINE));
        }
      };
      return {
        data(chunk: Buffer) {
          if (outcome !== 'exited') return;
          outputBytes += chunk.length;
          if (outputBytes > opts.maxOutputBytes) {
            killTree('output-limit');
            return;
          }
          pending += chunk.toString('utf8');
          const parts = pending.split('\n');
          pending = parts.pop()!;
          for (const p of parts) emit(p);
          // A line that never ends is written in pieces (masked whole pieces of 64 KiB).
          if (pending.length > 64 * 1024) {
            emit(pending);
            pending = '';
          }
        },
        end() {
          if (pending && outcome === 'exited') emit(pending);
          pending = '';
        },
      };
    };
    const out = reader('stdout');
    const err = reader('stderr');
    child.stdout.on('data', (chunk: Buffer) => out.data(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.data(chunk));
    child.on('error', () => {
      if (outcome === 'exited') outcome = 'spawn-failed';
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      opts.signal.removeEventListener('abort', onAbort);
      out.end();
      err.end();
      resolve({ code, outcome });
    });
  });
}

/**
 * Replaces every value of `secrets` (at least 4 characters; shorter ones would mask ordinary words) by `****`,
 * longest first so that a value containing another is masked whole.
 */
export function secretMasker(secrets: readonly string[]): (s: string) => string {
  // Each line of a multi-line value too: the log is masked line by line.
  const values = [
    ...new Set(secrets.flatMap((v) => [v, ...v.split(/\r?\n/)]).filter((v) => v.length >= 4)),
  ].sort((a, b) => b.length - a.length);
  if (values.length === 0) return (s) => s;
  const pattern = new RegExp(values.map((v) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
  return (s) => s.replace(pattern, '****');
}
