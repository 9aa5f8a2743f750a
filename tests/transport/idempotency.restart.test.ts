// Test tier: server
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { usingPostgres } from '../support/env.js';
import { http } from '../support/http.js';
import { freePort } from '../support/ports.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { waitForServerStart } from '../support/wait.js';

const ROOT = resolve(import.meta.dirname, '../..');

/**
 * Idempotency across a crash (docs/api-conventions.md, "Idempotency"): the real server in a child process is killed (SIGKILL) after
 * the change committed and before its answer left; after a restart on the same database, the retry with the same
 * key replays the first answer and nothing is created twice.
 */
describe('Idempotency-Key across a crash between the change and the response', function () {
  this.timeout(180_000);
  let dir: string;
  let databaseUrl: string | undefined;
  let scratch: ScratchDatabase | undefined;
  let child: ChildProcess | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'idem-restart-'));
    if (usingPostgres) {
      scratch = await ownPostgresDatabase('idem_restart');
      databaseUrl = scratch?.url;
    }
  });

  after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    await scratch?.drop();
  });

  const owner = { email: 'crash-owner@example.test', password: randomBytes(12).toString('base64url') };
  const jwtSecret = randomBytes(32).toString('hex');

  async function startServer(port: number): Promise<{ baseUrl: string; proc: ChildProcess }> {
    const proc = spawn(
      process.execPath,
      ['--import', 'tsx', '--import', './tests/support/crash-before-response.ts', 'server/main.ts'],
      {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          NODE_ENV: 'development',
          HOST: '127.0.0.1',
          PORT: String(port),
          DATA_DIR: join(dir, 'data'),
          ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
          JWT_SECRET: jwtSecret,
          BCRYPT_COST: '4',
          OWNER_EMAIL: owner.email,
          OWNER_PASSWORD: owner.password,
          ORGANIZATION_NAME: 'Crash Co',
          LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const baseUrl = `http://127.0.0.1:${port}`;
    await waitForServerStart(baseUrl, proc, () => stderr);
    return { baseUrl, proc };
  }

  it('replays the committed answer after the restart; nothing is created twice', async () => {
    const port = await freePort();
    const first = await startServer(port);
    child = first.proc;
    const login = await http(first.baseUrl, 'POST', '/v1/auth/login', { body: owner });
    expect(login.status).to.equal(200);
    const key = await http(first.baseUrl, 'POST', '/v1/api-keys', {
      token: login.body.token,
      body: { name: 'crash', permissions: ['vpn:read', 'vpn:write'] },
    });
    expect(key.status).to.equal(201);
    const secret = key.body.secret as string;
    const idempotencyKey = randomBytes(16).toString('hex');
    const body = { name: 'Laptop', location: 'eu-central', protocol: 'wireguard' };

    const exited = new Promise<NodeJS.Signals | null>((done) => first.proc.once('exit', (_, s) => done(s)));
    const crashed = await http(first.baseUrl, 'POST', '/v1/vpn/connections', {
      token: secret,
      body,
      headers: { 'idempotency-key': idempotencyKey, 'x-test-crash-before-response': '1' },
    }).then(
      () => 'answered',
      () => 'no answer',
    );
    expect(crashed).to.equal('no answer');
    expect(await exited).to.equal('SIGKILL');

    const second = await startServer(port);
    child = second.proc;
    try {
      const retry = await http(second.baseUrl, 'POST', '/v1/vpn/connections', {
        token: secret,
        body,
        headers: { 'idempotency-key': idempotencyKey },
      });
      expect(retry.status).to.equal(201);
      expect(retry.headers.get('idempotent-replayed')).to.equal('true');
      const list = await http(second.baseUrl, 'GET', '/v1/vpn/connections', { token: secret });
      expect(list.body.connections.map((c: { id: string }) => c.id)).to.deep.equal([
        retry.body.connection.id,
      ]);
      expect(retry.headers.get('location')).to.match(
        new RegExp(`/v1/vpn/connections/${retry.body.connection.id}$`),
      );
    } finally {
      second.proc.kill('SIGTERM');
      await new Promise((done) => second.proc.once('exit', done));
    }
  });
});
