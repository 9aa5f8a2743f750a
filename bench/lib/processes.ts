import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (bench/lib/ is two levels below it). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The server as `npm start` runs it: built from server/ by `npm run build` (see buildServer). */
export const SERVER_SCRIPT = 'dist/server/main.js';

/**
 * The Node flags `npm start` runs the server with (package.json's "start" script: `exec node <flags> <script>`), so
 * that every server the bench starts runs with the same ones (docs/benchmarks.md, "Memory under load").
 */
export const START_NODE_FLAGS: string[] = (() => {
  const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as {
    scripts: { start: string };
  };
  const words = pkg.scripts.start.split(/\s+/).filter(Boolean);
  const node = words.indexOf('node');
  if (node < 0 || words[words.length - 1] !== SERVER_SCRIPT)
    throw new Error(`package.json "start" is not "exec node <flags> ${SERVER_SCRIPT}": ${pkg.scripts.start}`);
  return words.slice(node + 1, -1);
})();

/** Builds the server as `npm start` does (esbuild: server/ and shared/ → dist/), once per bench run. */
export function buildServer(): void {
  const res = spawnSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
  if (res.status !== 0) throw new Error(`npm run build failed (${res.status ?? res.signal})`);
}

/** A server running in a child process, so that its memory and CPU are its own. */
export interface ServerHandle {
  name: string;
  baseUrl: string;
  pid: number;
  /** Milliseconds from spawn to the first successful health check. */
  startMs: number;
  /** Resident set size now, and its peak so far, in MB (from /proc). */
  rssMb(): number | null;
  peakRssMb(): number | null;
  /** Lines the process wrote at level warn or above (pino JSON with level ≥ 40) or to stderr. */
  warnings(): string[];
  /** SIGTERM, then SIGKILL after 15 s. Resolves with the exit code. */
  stop(): Promise<number | null>;
}

export async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => ok(port));
    });
  });
}

function procStatusMb(pid: number, field: 'VmRSS' | 'VmHWM'): number | null {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

const MAX_KEPT_LINES = 200;

/**
 * Starts `script` (relative to the repository root) on this process's Node, with no wrapper process: a built `.js`
 * file as it is, a TypeScript file with tsx loaded. The child gets exactly `env` plus PATH and HOME; waits until
 * `healthPath` answers 200.
 */
export async function startServerProcess(opts: {
  name: string;
  script: string;
  port: number;
  env: Record<string, string>;
  healthPath?: string;
  timeoutMs?: number;
}): Promise<ServerHandle> {
  const started = performance.now();
  const child: ChildProcess = spawn(
    process.execPath,
    [
      ...(opts.script === SERVER_SCRIPT ? START_NODE_FLAGS : ['--experimental-async-context-frame']),
      // Extra flags for the server under test (not the baselines), e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
      ...(opts.script === SERVER_SCRIPT
        ? (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean)
        : []),
      ...(opts.script.endsWith('.js') ? [opts.script] : ['--import', 'tsx', opts.script]),
    ],
    {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const output: string[] = [];
  const warnings: string[] = [];
  const keep = (line: string, fromStderr: boolean) => {
    if (!line.trim()) return;
    output.push(line);
    if (output.length > MAX_KEPT_LINES) output.shift();
    let level = fromStderr ? 50 : 0;
    try {
      level = Math.max(level, Number((JSON.parse(line) as { level?: number }).level ?? 0));
    } catch {
      // Not a pino line.
    }
    if (level >= 40 && warnings.length < MAX_KEPT_LINES) warnings.push(line);
  };
  const split = (fromStderr: boolean) => {
    let rest = '';
    return (chunk: Buffer) => {
      const lines = (rest + chunk.toString('utf8')).split('\n');
      rest = lines.pop() ?? '';
      for (const l of lines) keep(l, fromStderr);
    };
  };
  child.stdout!.on('data', split(false));
  child.stderr!.on('data', split(true));
  const exited = new Promise<number | null>((ok) => child.once('exit', (code) => ok(code)));
  let hasExited = false;
  void exited.then(() => (hasExited = true));

  const baseUrl = `http://127.0.0.1:${opts.port}`;
  const deadline = started + (opts.timeoutMs ?? 90_000);
  for (;;) {
    if (hasExited) {
      throw new Error(`${opts.name} exited during start:\n${output.slice(-30).join('\n')}`);
    }
    if (performance.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `${opts.name} did not answer ${opts.healthPath ?? '/healthz'} in time:\n${output.slice(-30).join('\n')}`,
      );
    }
    try {
      const res = await fetch(`${baseUrl}${opts.healthPath ?? '/healthz'}`);
      if (res.ok) break;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const startMs = performance.now() - started;
  const pid = child.pid!;
  return {
    name: opts.name,
    baseUrl,
    pid,
    startMs,
    rssMb: () => procStatusMb(pid, 'VmRSS'),
    peakRssMb: () => procStatusMb(pid, 'VmHWM'),
    warnings: () => [...warnings],
    async stop() {
      if (hasExited) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/**
 * The environment of a server a bench starts on its own in development mode (loopback HTTP allowed): on `port`,
 * logging warnings only, with no burst limit, and `env` (its database, secrets, owner, drivers) on top.
 */
export function developmentServerEnv(port: number, env: Record<string, string>): Record<string, string> {
  return {
    NODE_ENV: 'development',
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'warn',
    RATE_LIMIT_BURST: '1000000',
    ...env,
  };
}

/** JSON calls to a server's REST API, with a bearer token when given: the status and the parsed body. */
export function restCaller(baseUrl: string) {
  return async <T>(method: string, path: string, body?: unknown, token?: string) => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        'content-type': 'application/json',
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as T };
  };
}
