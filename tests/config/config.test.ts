// Test tier: unit
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ConfigError, loadConfig, DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS } from '../../server/config.js';
import { TEST_AT_REST_KEY } from '../support/env.js';

function problemsOf(env: Record<string, string | undefined>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

/**
 * Runs `tsx server/main.ts` (what `npm start` runs) with exactly `env` plus PATH and HOME, and resolves when it exits.
 * tsx is started directly rather than through npx: it relays SIGTERM to the server, and npx adds its own output.
 */
function runMain(
  env: Record<string, string>,
  opts: { until?: RegExp; then?: (pid: number) => void; timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('node_modules/.bin/tsx', ['server/main.ts'], {
      env: { PATH: process.env.PATH!, HOME: process.env.HOME!, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let triggered = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`timed out; stdout: ${stdout}; stderr: ${stderr}`));
    }, opts.timeoutMs ?? 60_000);
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      if (opts.until && !triggered && opts.until.test(stdout)) {
        triggered = true;
        opts.then?.(child.pid!);
      }
    });
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('configuration (docs/configuration.md, "Configuration")', () => {
  describe('loadConfig', () => {
    it('has the documented defaults on a development machine', () => {
      const c = loadConfig({});
      expect(c).to.deep.include({
        nodeEnv: 'development',
        isProduction: false,
        port: 3000,
        host: '127.0.0.1',
        databaseUrl: undefined,
        dataDir: './data',
        jwtSecret: undefined,
        owner: undefined,
        signupEnabled: true,
        publicBaseUrl: 'http://127.0.0.1:3000',
        bcryptCost: 12,
        trustProxy: false,
        tls: undefined,
        provisioningDelayMs: 2000,
        rateLimitBurst: 100,
        redis: undefined,
        logLevel: 'info',
        corsOrigins: '*',
        mail: undefined,
        passwordResetTtlMs: 30 * 60_000,
        sessionMaxAgeMs: 90 * 86_400_000,
      });
      expect(c.webhook).to.deep.equal({
        allowPrivateTargets: false,
        retryScheduleMs: DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS,
        timeoutMs: 10_000,
        disableAfterMs: 5 * 86_400_000,
      });
    });

    it('reads every variable', () => {
      const c = loadConfig({
        NODE_ENV: 'production',
        PORT: '8443',
        HOST: '0.0.0.0',
        DATABASE_URL: 'postgres://app@db:5432/platform',
        DATA_DIR: '/var/lib/platform',
        JWT_SECRET: 's'.repeat(32),
        OWNER_EMAIL: 'Boss@Example.com',
        OWNER_PASSWORD: 'boss-password',
        OWNER_NAME: 'Boss',
        ORGANIZATION_NAME: 'Boss Inc',
        SIGNUP_ENABLED: 'false',
        PUBLIC_BASE_URL: 'https://api.example.com/',
        BCRYPT_COST: '11',
        TRUST_PROXY: 'true',
        PROVISIONING_DELAY_MS: '50',
        WEBHOOK_RETRY_SCHEDULE: '1s,2s,3m',
        WEBHOOK_TIMEOUT_MS: '5000',
        WEBHOOK_DISABLE_AFTER: '36h',
        RATE_LIMIT_BURST: '7',
        REDIS_URL: 'rediss://:pw@cache.internal:6380/2',
        REDIS_KEY_PREFIX: 'api-eu:',
        LOG_LEVEL: 'warn',
        MAIL_URL: 'smtps://mailer:p%40ss@smtp.example.com:465',
        MAIL_FROM: 'Example <no-reply@example.com>',
        PASSWORD_RESET_TTL: '15m',
        SESSION_MAX_AGE: '30d',
      });
      expect(c).to.deep.include({
        isProduction: true,
        port: 8443,
        host: '0.0.0.0',
        databaseUrl: 'postgres://app@db:5432/platform',
        owner: {
          email: 'boss@example.com',
          password: 'boss-password',
          name: 'Boss',
          organizationName: 'Boss Inc',
        },
        signupEnabled: false,
        publicBaseUrl: 'https://api.example.com',
        bcryptCost: 11,
        trustProxy: true,
        provisioningDelayMs: 50,
        rateLimitBurst: 7,
        redis: { url: 'rediss://:pw@cache.internal:6380/2', keyPrefix: 'api-eu:' },
        logLevel: 'warn',
        mail: { url: 'smtps://mailer:p%40ss@smtp.example.com:465', from: 'Example <no-reply@example.com>' },
        passwordResetTtlMs: 15 * 60_000,
        sessionMaxAgeMs: 30 * 86_400_000,
      });
      expect(loadConfig({ REDIS_URL: 'redis://127.0.0.1:6379' }).redis).to.deep.equal({
        url: 'redis://127.0.0.1:6379',
        keyPrefix: 'cloud-platform:',
      });
      expect(c.webhook.retryScheduleMs).to.deep.equal([1000, 2000, 180_000]);
      expect(c.webhook.disableAfterMs).to.equal(36 * 3_600_000);
    });

    it('reads CORS_ORIGINS: * or exact origins (normalized as browsers send them), anything else refused', () => {
      expect(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins).to.equal('*');
      expect(
        loadConfig({
          CORS_ORIGINS: 'https://App.Example.com/, http://localhost:5173,https://app.example.com:443',
        }).corsOrigins,
      ).to.deep.equal(['https://app.example.com', 'http://localhost:5173']);
      for (const bad of [
        'https://app.example.com/path',
        'app.example.com',
        'ftp://x.example',
        'null',
        '*,https://a.b',
      ]) {
        expect(() => loadConfig({ CORS_ORIGINS: bad }), bad).to.throw(ConfigError, /CORS_ORIGINS must be \*/);
      }
    });

    it('treats empty variables as unset', () => {
      expect(loadConfig({ PORT: '', JWT_SECRET: '', SIGNUP_ENABLED: '' }).port).to.equal(3000);
    });

    it('reports every bad value, one readable line each, without repeating secrets', () => {
      const problems = problemsOf({
        NODE_ENV: 'staging',
        PORT: 'eighty',
        DATABASE_URL: 'mysql://root:topsecret@db/x',
        JWT_SECRET: 'short-secret',
        OWNER_EMAIL: 'not-an-email',
        OWNER_PASSWORD: 'tiny',
        SIGNUP_ENABLED: 'maybe',
        PUBLIC_BASE_URL: 'ftp://files.example.com',
        BCRYPT_COST: '40',
        TRUST_PROXY: 'sometimes',
        PROVISIONING_DELAY_MS: '-5',
        WEBHOOK_RETRY_SCHEDULE: '1s,,soon',
        WEBHOOK_TIMEOUT_MS: '10',
        WEBHOOK_DISABLE_AFTER: 'never',
        RATE_LIMIT_BURST: '0',
        REDIS_URL: 'http://:hunter2@cache:6379',
        REDIS_KEY_PREFIX: 'has space',
        LOG_LEVEL: 'loud',
      });
      const expected = [
        'NODE_ENV',
        'PORT',
        'DATABASE_URL',
        'JWT_SECRET',
        'OWNER_EMAIL',
        'OWNER_PASSWORD',
        'SIGNUP_ENABLED',
        'PUBLIC_BASE_URL',
        'BCRYPT_COST',
        'TRUST_PROXY',
        'PROVISIONING_DELAY_MS',
        'WEBHOOK_RETRY_SCHEDULE',
        'WEBHOOK_TIMEOUT_MS',
        'WEBHOOK_DISABLE_AFTER',
        'RATE_LIMIT_BURST',
        'REDIS_URL',
        'REDIS_KEY_PREFIX',
        'LOG_LEVEL',
      ];
      for (const key of expected) {
        expect(
          problems.filter((p) => p.startsWith(key)),
          `${key} in ${problems.join(' | ')}`,
        ).to.have.length(1);
      }
      expect(problems).to.have.length(expected.length);
      for (const p of problems) expect(p).not.to.include('\n');
      expect(problems.join('\n')).not.to.match(/topsecret|short-secret|tiny|hunter2/);
      for (const bad of ['redis://', 'redis://cache:6379/db', 'cache:6379', 'redis://cache:99999']) {
        expect(problemsOf({ REDIS_URL: bad }), bad).to.deep.equal([
          'REDIS_URL must be a redis:// or rediss:// URL such as redis://127.0.0.1:6379 or redis://:password@host:6379/0',
        ]);
      }
      expect(problems.find((p) => p.startsWith('PORT'))).to.equal(
        'PORT must be a whole number (got "eighty")',
      );
    });

    it('refuses production without JWT_SECRET, with a low bcrypt cost, or with private webhook targets', () => {
      const problems = problemsOf({
        NODE_ENV: 'production',
        BCRYPT_COST: '8',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        PORT: 'x',
      });
      expect(problems).to.have.members([
        'PORT must be a whole number (got "x")',
        'JWT_SECRET is required when NODE_ENV=production',
        'BCRYPT_COST must be at least 10 when NODE_ENV=production',
        'WEBHOOK_ALLOW_PRIVATE_TARGETS cannot be true when NODE_ENV=production',
        'MAIL_URL is required when NODE_ENV=production (an smtp:// or smtps:// URL)',
      ]);
      expect(
        problemsOf({
          NODE_ENV: 'production',
          JWT_SECRET: 'x'.repeat(32),
          MAIL_URL: 'smtp://mail.internal:587',
          MAIL_FROM: 'no-reply@example.com',
        }),
      ).to.deep.equal([]);
      expect(problemsOf({ NODE_ENV: 'test', BCRYPT_COST: '4' })).to.deep.equal([]);
    });

    it('checks MAIL_URL and MAIL_FROM, never repeating the URL (it holds the SMTP password)', () => {
      expect(
        problemsOf({ MAIL_URL: 'http://user:hunter2@mail.example.com', MAIL_FROM: 'a@b.test' }),
      ).to.deep.equal([
        'MAIL_URL must be an smtp:// or smtps:// URL such as smtp://user:password@mail.example.com:587',
      ]);
      expect(problemsOf({ MAIL_URL: 'smtp://user:hunter2@mail.example.com' })).to.deep.equal([
        'MAIL_FROM is required with MAIL_URL',
      ]);
      expect(problemsOf({ MAIL_URL: 'smtp://mail.example.com', MAIL_FROM: 'nobody' })).to.deep.equal([
        'MAIL_FROM must be an address such as no-reply@example.com or Example <no-reply@example.com> (got "nobody")',
      ]);
      expect(loadConfig({}).mail).to.equal(undefined);
      expect(problemsOf({ SESSION_MAX_AGE: '10s', PASSWORD_RESET_TTL: '2d' })).to.have.length(2);
    });

    it('needs OWNER_EMAIL with OWNER_PASSWORD and TLS_CERT_FILE with TLS_KEY_FILE', () => {
      expect(problemsOf({ OWNER_EMAIL: 'a@b.test' })).to.deep.equal([
        'OWNER_EMAIL and OWNER_PASSWORD must be set together',
      ]);
      expect(problemsOf({ TLS_KEY_FILE: '/k.pem' })).to.deep.equal([
        'TLS_CERT_FILE and TLS_KEY_FILE must be set together',
      ]);
    });

    it('checks that the TLS files exist and hold a certificate and its key', () => {
      const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
      try {
        writeFileSync(join(dir, 'junk.pem'), 'not a certificate');
        expect(
          problemsOf({ TLS_CERT_FILE: join(dir, 'missing.pem'), TLS_KEY_FILE: join(dir, 'junk.pem') }),
        ).to.deep.equal([`TLS_CERT_FILE: cannot read ${join(dir, 'missing.pem')} (ENOENT)`]);
        expect(
          problemsOf({ TLS_CERT_FILE: join(dir, 'junk.pem'), TLS_KEY_FILE: join(dir, 'junk.pem') }),
        ).to.deep.equal([
          'TLS_CERT_FILE and TLS_KEY_FILE must be a PEM certificate and its matching private key',
        ]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('tsx server/main.ts', function () {
    this.timeout(90_000);

    it('exits 1 with one line per problem when the configuration is invalid', async () => {
      const res = await runMain({
        NODE_ENV: 'production',
        PORT: '99999',
        LOG_LEVEL: 'loud',
        BCRYPT_COST: '9',
      });
      expect(res.code).to.equal(1);
      const lines = res.stderr.trim().split('\n');
      expect(lines[0]).to.equal('Invalid configuration:');
      expect(lines.slice(1)).to.have.members([
        '  - PORT must be between 0 and 65535 (got "99999")',
        '  - LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent (got "loud")',
        '  - JWT_SECRET is required when NODE_ENV=production',
        '  - BCRYPT_COST must be at least 10 when NODE_ENV=production',
        '  - MAIL_URL is required when NODE_ENV=production (an smtp:// or smtps:// URL)',
      ]);
      expect(res.stdout).to.equal('');
    });

    it('starts without warnings, and on SIGTERM stops and exits 0', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'main-'));
      try {
        const env: Record<string, string> = { PORT: '0', DATA_DIR: dir, LOG_LEVEL: 'info' };
        // On the run's database: the suite's at-rest key, which opens what the other tests stored there.
        if (process.env.DATABASE_URL)
          Object.assign(env, { DATABASE_URL: process.env.DATABASE_URL, TWO_FACTOR_KEY: TEST_AT_REST_KEY });
        const res = await runMain(env, {
          until: /server listening/,
          then: (pid) => process.kill(pid, 'SIGTERM'),
        });
        expect(res.code, res.stderr).to.equal(0);
        expect(res.stderr).to.equal('');
        expect(res.stdout).to.match(/shutting down/);
        expect(res.stdout).not.to.match(/Deprecation|FSTDEP|Warning/i);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
