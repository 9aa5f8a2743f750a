import { spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readlinkSync, statSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { LOG_LINE_MAX_CHARS } from './build-logs.js';
import type { LogStream } from './hosting.constants.js';

/**
 * Runs one command of a real build (git, the install, the build command) as a process group of its own, line by
 * line, with a wall-time limit, an output limit and cancellation that kills the whole tree at once
 * (docs/hosting.md, "The sandbox").
 */

/** Longest line kept whole; longer ones are cut (after masking, so a secret is never split across lines). */
const MAX_LINE = LOG_LINE_MAX_CHARS;
/** A line that never ends is masked and written in pieces of this many characters. */
const MAX_PENDING = 64 * 1024;

export interface SandboxSpec {
  /** The build's own directory on the host: `/build` inside, the only writable place (docs/hosting.md). */
  buildDir: string;
  /** A directory of the API with the sandbox's own `passwd`, `group`, `hosts` and `nsswitch.conf`. */
  etcDir: string;
  /**
   * Where the build's user reaches the Node.js install ({@link nodeInstallDir}), shown at that install's own path
   * inside: the install itself, or a copy beside the build directories when a directory above it is closed to
   * other users (a checkout in a 0700 directory).
   */
  nodeDir: string;
  /** Most processes at once (RLIMIT_NPROC). */
  maxProcesses: number;
  /** Largest file the build may write (RLIMIT_FSIZE). */
  maxFileBytes: number;
  /** `cgroup.procs` of the build's own cgroup, joined before anything of the build runs (build-limits.ts). */
  cgroupProcs?: string;
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
  /** Each line of output, already masked (and decoded: invalid UTF-8 is U+FFFD). */
  onLine(stream: LogStream, line: string): void;
  /** Output (bytes) allowed before the command is killed. */
  maxOutputBytes: number;
  /** Masks a text of one or more lines (secret-masker.ts), keeping its line breaks. */
  mask: (s: string) => string;
}

export interface RunResult {
  code: number | null;
  /** The signal that ended it, if one did (SIGXFSZ: a file reached the largest size allowed). */
  signal?: NodeJS.Signals | null;
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

/** Where the build directory is inside the sandbox (its `src`, `home`, `tmp` and `shm` below it). */
export const SANDBOX_BUILD_DIR = '/build';

/** Pieces of the host's /etc a build may read: certificates, the loader's cache, time zone, MIME types. */
const ETC_ALLOWED = [
  '/etc/ssl/certs',
  '/etc/ssl/openssl.cnf',
  '/etc/ca-certificates',
  '/etc/ca-certificates.conf',
  '/etc/pki/tls/certs',
  '/etc/pki/ca-trust',
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/alternatives',
  '/etc/localtime',
  '/etc/timezone',
  '/etc/mime.types',
  '/etc/protocols',
  '/etc/services',
  '/etc/os-release',
];
/** Files of /etc the sandbox gets from `etcDir` (made by the driver), not from the host. */
export const SANDBOX_ETC_FILES = ['passwd', 'group', 'hosts', 'nsswitch.conf'] as const;

/** The directory of the Node.js that runs builds (`/usr` for a system Node.js, an install directory otherwise). */
export function nodeInstallDir(): string {
  const bin = dirname(process.execPath);
  return basename(bin) === 'bin' ? dirname(bin) : bin;
}

/**
 * Whether a user other than the owner can pass through every directory above `path` (each has the x bit for
 * others): bubblewrap, started as the build's user, must reach what it mounts.
 */
export function othersCanReach(path: string): boolean {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const st = statSync(dir, { throwIfNoEntry: false });
    if (!st || (st.mode & 0o001) === 0) return false;
    if (dir === dirname(dir)) return true;
  }
}

/** The host's allow-list as bubblewrap arguments, read once (the host's layout does not change while it runs). */
let systemArgs: { nodeDir: string; args: string[] } | undefined;
function systemView(nodeDir: string): string[] {
  if (systemArgs?.nodeDir === nodeDir) return systemArgs.args;
  const args = ['--ro-bind', '/usr', '/usr'];
  // /bin, /lib… are links into /usr on a merged-/usr system (kept as links), directories elsewhere.
  for (const top of ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
    const st = lstatSync(top, { throwIfNoEntry: false });
    if (st?.isSymbolicLink()) args.push('--symlink', readlinkSync(top), top);
    else if (st?.isDirectory()) args.push('--ro-bind', top, top);
  }
  const node = nodeInstallDir();
  if (node !== '/usr' && !node.startsWith('/usr/')) args.push('--ro-bind', nodeDir, node);
  args.push('--dir', '/etc');
  for (const path of ETC_ALLOWED) if (existsSync(path)) args.push('--ro-bind', path, path);
  systemArgs = { nodeDir, args };
  return args;
}

/**
 * The bubblewrap command line (docs/hosting.md, "The sandbox"): an allow-list of the host, read-only (its
 * programs and libraries, the Node.js that runs builds, certificates and a few files of /etc), never `/` with holes:
 * the API's data, configuration, backups, home and other builds are simply not there. Fresh /dev, /proc of its own
 * PID namespace (no other process is visible, the API's `/proc/<pid>/environ` included), no network, the build
 * directory at `/build` (its `tmp` is `/tmp`, its `shm` is `/dev/shm`: every file the build writes is in it, where
 * its disk limit counts), run as `nobody`, with limits on processes and file size.
 */
export function bwrapArgs(spec: SandboxSpec, cwd: string, argv: string[]): string[] {
  const args = [...systemView(spec.nodeDir)];
  for (const file of SANDBOX_ETC_FILES) args.push('--ro-bind', `${spec.etcDir}/${file}`, `/etc/${file}`);
  args.push(
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--bind',
    spec.buildDir,
    SANDBOX_BUILD_DIR,
    '--bind',
    `${spec.buildDir}/tmp`,
    '/tmp',
    '--bind',
    `${spec.buildDir}/shm`,
    '/dev/shm',
    '--remount-ro',
    '/dev',
    '--remount-ro',
    '/',
    '--unshare-all',
    // A user namespace always (bubblewrap runs unprivileged), and none nested in it: less of the kernel to reach.
    '--unshare-user',
    '--disable-userns',
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
  const [direct, directArgs] = opts.sandbox
    ? ['bwrap', bwrapArgs(opts.sandbox, opts.cwd, opts.argv)]
    : [opts.argv[0]!, opts.argv.slice(1)];
  // The build's cgroup is joined by a shell that then becomes bubblewrap: nothing of the build runs outside it.
  const procs = opts.sandbox?.cgroupProcs;
  const [cmd, args] = procs
    ? ['/bin/sh', ['-c', 'echo $$ > "$0" && exec "$@"', procs, direct, ...directArgs]]
    : [direct, directArgs];
  // As root, bubblewrap itself runs as nobody: its user namespace then maps to nobody outside too, so the build
  // cannot read root's files even where they are visible (as root, the namespace's user would be root outside).
  const asNobody = opts.sandbox && process.getuid?.() === 0 ? { uid: NOBODY, gid: NOBODY } : {};
  return new Promise<RunResult>((resolve) => {
    let outcome: RunResult['outcome'] = 'exited';
    let outputBytes = 0;
    const child = spawn(cmd, args, {
      // In the sandbox, `cwd` is a path inside it; bubblewrap starts in the build's directory on the host.
      cwd: opts.sandbox ? opts.sandbox.buildDir : opts.cwd,
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
      // Decodes UTF-8 across chunks: a character split between two chunks arrives whole, invalid bytes as U+FFFD.
      const decoder = new StringDecoder('utf8');
      let pending = '';
      const emitLine = (line: string) => {
        const l = line.endsWith('\r') ? line.slice(0, -1) : line;
        for (let i = 0; i < l.length || i === 0; i += MAX_LINE) opts.onLine(stream, l.slice(i, i + MAX_LINE));
      };
      // Every complete line of a chunk (and the unfinished line before it) is masked at once, so a value split by
      // line breaks within the chunk is masked too; then cut (a masked value is never split across lines).
      const emit = (text: string) => {
        for (const line of opts.mask(text).split('\n')) emitLine(line);
      };
      const take = (text: string) => {
        pending += text;
        const end = pending.lastIndexOf('\n');
        if (end >= 0) {
          emit(pending.slice(0, end));
          pending = pending.slice(end + 1);
        }
        if (pending.length > MAX_PENDING) {
          emit(pending);
          pending = '';
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
          take(decoder.write(chunk));
        },
        end() {
          if (outcome === 'exited') take(decoder.end());
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
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      opts.signal.removeEventListener('abort', onAbort);
      out.end();
      err.end();
      resolve({ code, signal, outcome });
    });
  });
}
