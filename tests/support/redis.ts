import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';
import { waitFor } from './wait.js';
import pino from 'pino';
import type { Logger } from '../../server/kit/deps.js';

/**
 * The Redis the suite uses for the limits shared by several processes (docs/api-conventions.md, "Rate limits and quotas"): the one on
 * 127.0.0.1:6379 unless TEST_REDIS_URL says otherwise. Every test works under a key prefix of its own and removes
 * its keys, so several runs may share one Redis.
 */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';

/** A key prefix no other test or run uses. */
export function uniqueRedisPrefix(label: string): string {
  return `test:${label}:${process.pid}:${randomBytes(4).toString('hex')}:`;
}

/** A plain client for a test's own reads (closed with `disconnect()`). */
export function redisClient(url = TEST_REDIS_URL): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
}

/**
 * Whether the suite's Redis answers. When it does not, the calling suite is skipped with the reason, so that
 * `npm test` works on a machine without Redis (README); with TEST_REQUIRE_SERVICES=1 (set by .ci/run) it fails with
 * a readable message instead, so that CI never passes by skipping.
 */
export async function requireRedis(ctx: Mocha.Context, url = TEST_REDIS_URL): Promise<void> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.ping();
  } catch (err) {
    skipOrFail(
      ctx,
      `This test needs Redis at ${url} (TEST_REDIS_URL): ${(err as Error).message.replace(/\.$/, '')}. Start one with ` +
        "`redis-server --save '' --daemonize yes`.",
      err,
    );
  } finally {
    client.disconnect();
  }
}

/** Skips the calling suite (a machine without the service), or fails under TEST_REQUIRE_SERVICES=1 (CI). */
export function skipOrFail(ctx: Mocha.Context, reason: string, cause?: unknown): never {
  if (process.env.TEST_REQUIRE_SERVICES === '1') throw new Error(reason, { cause });
  console.warn(`      skipped: ${reason}`);
  ctx.skip();
}

/** Deletes every key under `prefix` on `url`. */
export async function deleteRedisKeys(prefix: string, url = TEST_REDIS_URL): Promise<void> {
  const client = redisClient(url);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await client.del(...keys);
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
}

/** Whether `redis-server` can be run here (the tests that stop and start a Redis of their own need it). */
export const redisServerAvailable =
  spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;

/**
 * A Redis server of the test's own on a free port (a child process, so that the test can stop it, make it hang or
 * start it again on the same port). `stop('save')` writes its data first, which the next `start()` loads.
 */
export class PrivateRedis {
  private child: ChildProcess | undefined;
  private readonly dir = mkdtempSync(join(tmpdir(), 'test-redis-'));

  private constructor(readonly port: number) {}

  static async start(): Promise<PrivateRedis> {
    const redis = new PrivateRedis(await freePort());
    await redis.start();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        this.dir,
        '--dbfilename',
        'dump.rdb',
      ],
      { stdio: 'ignore' },
    );
    this.child = child;
    await waitFor(
      'redis-server to start',
      async () => {
        if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
        const client = new Redis(this.url, {
          lazyConnect: true,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
        });
        client.on('error', () => undefined);
        try {
          await client.connect();
          return (await client.ping()) === 'PONG';
        } catch {
          return false; // not listening yet
        } finally {
          client.disconnect();
        }
      },
      { timeoutMs: 10_000, intervalMs: 50 },
    );
  }

  /** Stops the server: `save` writes its data for the next start; `nosave` loses it. */
  async stop(mode: 'save' | 'nosave' = 'nosave'): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((done) => child.once('exit', done));
    const client = new Redis(this.url, { maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    await (mode === 'save' ? client.shutdown('SAVE') : client.shutdown('NOSAVE')).catch(() => undefined);
    client.disconnect();
    await exited;
  }

  /** Commands of every client wait `ms` (the server hangs, without closing a connection). */
  async pause(ms: number): Promise<void> {
    const client = new Redis(this.url);
    try {
      await client.client('PAUSE', ms, 'ALL');
    } finally {
      client.disconnect();
    }
  }

  async destroy(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null) {
      const exited = new Promise((done) => child.once('exit', done));
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A logger that keeps the lines it writes at `warn` and above, parsed, for a test to read. */
export function capturingLogger(): { log: Logger; lines: { level: number; msg: string }[] } {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        const parsed = JSON.parse(line) as { level: number; msg: string };
        lines.push({ level: parsed.level, msg: parsed.msg });
      }
      done();
    },
  });
  return { log: pino({ level: 'warn' }, stream), lines };
}
