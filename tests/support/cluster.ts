import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from './ports.js';
import { waitFor } from './wait.js';

const ROOT = resolve(import.meta.dirname, '../..');
/** What `npm start` runs (README, "Quick start"): server/ and shared/ built by esbuild into dist/. */
const SERVER_SCRIPT = 'dist/server/main.js';
const KEPT_LINES = 300;

let built = false;

/** Builds the server as `npm start` does, once per run: processes start faster and lighter than through tsx. */
function buildServer(): void {
  if (built) return;
  const res = spawnSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
  if (res.status !== 0) throw new Error(`npm run build failed (${res.status ?? res.signal})`);
  built = true;
}

/** One server process of a cluster. */
export interface ClusterProcess {
  name: string;
  baseUrl: string;
  pid: number;
  /** The last lines it wrote (pino JSON on stdout, anything on stderr). */
  output(): string[];
  /** Its exit code and signal, once it has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends `signal` (SIGTERM: drains and exits 0; SIGKILL: dies at once) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface Cluster {
  processes: ClusterProcess[];
  /** The environment every process got (a new one started with `add` gets the same). */
  env: Record<string, string>;
  /** Starts one more process with the same settings (for example after one was killed). */
  add(): Promise<ClusterProcess>;
  /** SIGTERM to every process still running (SIGKILL after 20 s), then removes the data directory. */
  stop(): Promise<void>;
  /** The last lines of every process, for a failure message. */
  describe(): string;
}

/**
 * Several server processes (the built server, as `npm start` runs it) on one PostgreSQL database, with the same
 * secrets and, when `redis` is given, one Redis under one key prefix: what docs/deploying.md describes, on loopback
 * ports. The first process migrates the database before the others start.
 */
export async function startCluster(opts: {
  size: number;
  databaseUrl: string;
  redis?: { url: string; keyPrefix: string };
  env?: Record<string, string>;
  /** How long a process may take to answer /readyz (a loaded machine starts slowly). */
  startTimeoutMs?: number;
}): Promise<Cluster> {
  buildServer();
  const dataDir = mkdtempSync(join(tmpdir(), 'test-cluster-'));
  const env: Record<string, string> = {
    NODE_ENV: 'development',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    DATABASE_URL: opts.databaseUrl,
    JWT_SECRET: randomBytes(32).toString('hex'),
    TWO_FACTOR_KEY: randomBytes(32).toString('hex'),
    BCRYPT_COST: '4',
    PROVISIONING_DELAY_MS: '200',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_RETRY_SCHEDULE: '200ms,400ms',
    LOG_LEVEL: 'warn',
    // Every test logs in from 127.0.0.1; the per-address limit has its own test.
    AUTH_RATE_LIMIT: '1000000',
    ...(opts.redis ? { REDIS_URL: opts.redis.url, REDIS_KEY_PREFIX: opts.redis.keyPrefix } : {}),
    ...opts.env,
  };
  const processes: ClusterProcess[] = [];
  const running = new Set<ChildProcess>();

  async function startOne(index: number): Promise<ClusterProcess> {
    const port = await freePort();
    const name = `process ${index} (port ${port})`;
    const child = spawn(process.execPath, ['--experimental-async-context-frame', SERVER_SCRIPT], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child);
    const lines: string[] = [];
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        lines.push(line);
        if (lines.length > KEPT_LINES) lines.shift();
      }
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
      child.once('exit', (code, signal) => {
        running.delete(child);
        done({ code, signal });
      }),
    );
    const baseUrl = `http://127.0.0.1:${port}`;
    await waitFor(
      `${name} to answer /readyz`,
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`${name} exited during start:\n${lines.slice(-20).join('\n')}`);
        }
        try {
          const res = await fetch(`${baseUrl}/readyz`);
          const body = (await res.json()) as { status?: string };
          // With Redis, ready means connected to it too (not `degraded`).
          return res.status === 200 && body.status === 'ready' ? true : undefined;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: opts.startTimeoutMs ?? 90_000, intervalMs: 100 },
    ).catch((err: unknown) => {
      child.kill('SIGKILL');
      throw err;
    });
    return {
      name,
      baseUrl,
      pid: child.pid!,
      output: () => [...lines],
      exited,
      async kill(signal = 'SIGTERM') {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal);
        return exited;
      },
    };
  }

  try {
    // The first one applies the migrations; the rest start together on the migrated database.
    processes.push(await startOne(0));
    processes.push(...(await Promise.all(Array.from({ length: opts.size - 1 }, (_, i) => startOne(i + 1)))));
  } catch (err) {
    for (const child of running) child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }

  return {
    processes,
    env,
    async add() {
      const p = await startOne(processes.length);
      processes.push(p);
      return p;
    },
    async stop() {
      await Promise.all(
        processes.map(async (p) => {
          const timer = setTimeout(() => void p.kill('SIGKILL'), 20_000);
          await p.kill('SIGTERM');
          clearTimeout(timer);
        }),
      );
      rmSync(dataDir, { recursive: true, force: true });
    },
    describe() {
      return processes.map((p) => `${p.name}:\n  ${p.output().slice(-15).join('\n  ')}`).join('\n');
    },
  };
}
