// Test tier: server
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { TEST_AT_REST_KEY } from '../support/env.js';

const ROOT = resolve(import.meta.dirname, '../..');

interface LogLine {
  msg?: string;
  reqId?: string;
  signal?: string;
  [key: string]: unknown;
}

/**
 * The real server, started as the README says (`npm start`), on a fresh data directory: SIGTERM (sent to npm, which
 * forwards it) lets the request in flight finish, stops the jobs and the database, and exits 0.
 */
describe('server process: SIGTERM', function () {
  this.timeout(120_000);
  let dir: string;
  let child: ChildProcess | undefined;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'sigterm-'));
  });
  after(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('finishes the request in flight, then exits 0', async () => {
    const logs: LogLine[] = [];
    const waiters: { test: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];
    const waitForLog = (test: (l: LogLine) => boolean, what: string) =>
      new Promise<LogLine>((resolvePromise, reject) => {
        const found = logs.find(test);
        if (found) return resolvePromise(found);
        const timer = setTimeout(() => reject(new Error(`no log line: ${what}`)), 60_000);
        waiters.push({
          test,
          resolve: (l) => {
            clearTimeout(timer);
            resolvePromise(l);
          },
        });
      });

    child = spawn('npm', ['start', '--silent'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        NODE_ENV: 'development',
        HOST: '127.0.0.1',
        PORT: '0',
        DATA_DIR: join(dir, 'data'),
        ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
        JWT_SECRET: randomBytes(32).toString('hex'),
        // On the run's database: the suite's at-rest key, which opens what the other tests stored there.
        TWO_FACTOR_KEY: TEST_AT_REST_KEY,
        // Registration hashes the password: at cost 12 the request stays in flight long enough to be caught.
        BCRYPT_COST: '12',
        LOG_LEVEL: 'debug',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    let pending = '';
    child.stdout!.on('data', (d: Buffer) => {
      pending += d.toString();
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const text of lines) {
        let line: LogLine;
        try {
          line = JSON.parse(text) as LogLine;
        } catch {
          continue;
        }
        logs.push(line);
        for (const w of [...waiters]) {
          if (w.test(line)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(line);
          }
        }
      }
    });
    const exited = new Promise<number | null>((r) => child!.on('exit', (code) => r(code)));

    const listening = await Promise.race([
      waitForLog((l) => /^Server listening at http:\/\/127\.0\.0\.1:\d+/.test(l.msg ?? ''), 'listening'),
      exited.then((code) => {
        throw new Error(`server exited with ${code} before listening: ${stderr}`);
      }),
    ]);
    const baseUrl = /http:\/\/127\.0\.0\.1:\d+/.exec(listening.msg!)![0];

    const response = fetch(`${baseUrl}/v1/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        email: `sigterm-${randomBytes(4).toString('hex')}@example.test`,
        password: 'correct-horse-battery',
        name: 'Sig Term',
        organization_name: 'Shutdown Inc',
      }),
    });
    const incoming = await waitForLog(
      (l) => l.msg === 'incoming request' && JSON.stringify(l).includes('/v1/auth/register'),
      'the request arriving',
    );
    child.kill('SIGTERM');

    const res = await response;
    expect(res.status).to.equal(201);
    const body = (await res.json()) as { success: boolean; user: { email: string } };
    expect(body.success).to.equal(true);
    const code = await exited;
    const errors = logs.filter((l) => (l.level as number) >= 50);
    expect(code, `exit code; errors: ${JSON.stringify(errors)} ${stderr}`).to.equal(0);

    // The request was still in flight when the shutdown began, and completed before the process stopped.
    const index = (test: (l: LogLine) => boolean) => logs.findIndex(test);
    const shuttingDown = index((l) => l.signal === 'SIGTERM');
    const completed = index((l) => l.msg === 'request completed' && l.reqId === incoming.reqId);
    const stopped = index((l) => l.msg === 'stopped');
    expect(shuttingDown, 'shutdown logged').to.be.greaterThan(logs.indexOf(incoming));
    expect(completed, 'request completed after the shutdown began').to.be.greaterThan(shuttingDown);
    expect(stopped, 'services stopped after the request').to.be.greaterThan(completed);
    expect(errors, 'no errors logged').to.deep.equal([]);
  });
});
