import { resolve } from 'node:path';
import pino from 'pino';
import { ApiUsage, BURST_WINDOW_SECONDS } from './limits/api-usage.js';
import { AuthEndpointLimits } from './limits/auth-endpoint-limits.js';
import { PasswordHasher } from './access/passwords.js';
import { SharedLimits } from './limits/shared-limits.js';
import { TokenService, resolveJwtSecret } from './access/tokens.js';
import type { Config } from './config.js';
import { openDatabase } from './db/orm.js';
import { auditSubscriber } from './events/audit.js';
import { createJobQueue } from './jobs/queue.js';
import { atRestKeyRings, reencryptAtRest } from './kit/at-rest.js';
import type { AppDeps, Logger } from './kit/deps.js';
import { buildRegistry } from './kit/registry.js';
import {
  createModuleRuntimes,
  stopModuleRuntimes,
  defineModuleJobs,
  ProcessRuntime,
  type ModuleOverrides,
} from './kit/runtime.js';
import { resolveGeneratedSecret } from './lib/secret-file.js';
import { systemClock, type Clock } from './lib/time.js';
import { LogMailDriver, type MailDriver } from './mail/mail-driver.js';
import { SmtpMailDriver } from './mail/smtp-mail-driver.js';
import { bootstrapOwner } from './modules/auth/auth.service.js';
import { modules } from './modules.js';

export interface StartOptions {
  clock?: Clock;
  log?: Logger;
  /** Overrides the embedded database directory (tests use `memory://`). */
  pgliteDataDir?: string;
  /** What an in-memory PGlite starts from (a migrated template's dump, tests: docs/development.md, "Tests"). */
  pgliteInitialData?: Blob;
  /** Start the job workers (default true). */
  startJobs?: boolean;
  /** Outgoing mail; by default SMTP with MAIL_URL, else the log driver. */
  mail?: MailDriver;
  /**
   * Pieces of modules' runtimes laid over what their manifests' `create` built, before anything runs (tests: a
   * driver that fails on purpose, `{ billing: { driver } }`).
   */
  modules?: ModuleOverrides;
}

export function createLogger(config: Config): Logger {
  return pino({
    level: config.logLevel,
    redact: ['req.headers.authorization', 'password', '*.password', '*.refresh_token', '*.token'],
  });
}

/**
 * The keys that encrypt data at rest (docs/security.md, "Encryption at rest"), one ring per purpose, derived from
 * TWO_FACTOR_KEY (and TWO_FACTOR_KEY_PREVIOUS during a rotation); without it, in production from JWT_SECRET (every
 * process has it), elsewhere from a secret generated once into DATA_DIR.
 */
function dataKeys(config: Config, jwtSecret: string): AppDeps['keys'] {
  const secret =
    config.twoFactorKey ??
    (config.isProduction ? jwtSecret : resolveGeneratedSecret('two-factor-key', undefined, config.dataDir));
  return atRestKeyRings(secret, config.twoFactorKeyPrevious);
}

/**
 * Config → database (migrated) → tokens → jobs → the modules' runtimes → job handlers and workers → owner bootstrap.
 * What main.ts and the tests both run.
 */
export async function startServices(config: Config, opts: StartOptions = {}): Promise<AppDeps> {
  const log = opts.log ?? createLogger(config);
  const registry = buildRegistry(modules);
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    pgliteDataDir: opts.pgliteDataDir ?? resolve(config.dataDir, 'pglite'),
    pgliteInitialData: opts.pgliteInitialData,
    entities: [...registry.entities],
    migrations: [...registry.migrations],
  });
  // Every mutation's audit entry is written in the transaction of its change (server/events/audit.ts).
  db.orm.em.getEventManager().registerSubscriber(auditSubscriber());
  const jwtSecret = resolveJwtSecret(config.jwtSecret, config.dataDir);
  const tokens = new TokenService(jwtSecret);
  const keys = dataKeys(config, jwtSecret);
  const jobs = createJobQueue(db, log);
  const clock = opts.clock ?? systemClock;
  // Only with REDIS_URL: the burst limits and monthly quotas shared by several processes (docs/deploying.md).
  const shared = config.redis
    ? await SharedLimits.connect({
        url: config.redis.url,
        keyPrefix: config.redis.keyPrefix,
        burstLimit: config.rateLimitBurst,
        burstWindowSeconds: BURST_WINDOW_SECONDS,
        log,
      })
    : undefined;
  const apiUsage = new ApiUsage(db, clock, log, config.rateLimitBurst, shared);
  const authLimits = new AuthEndpointLimits(
    config.authRateLimit.points,
    config.authRateLimit.windowSeconds,
    shared,
  );
  const mail = opts.mail ?? (config.mail ? new SmtpMailDriver(config.mail) : new LogMailDriver(log));
  const passwords = new PasswordHasher({ cost: config.bcryptCost });
  const deps: AppDeps = {
    config,
    db,
    tokens,
    jobs,
    clock,
    log,
    apiUsage,
    authLimits,
    mail,
    passwords,
    registry,
    keys,
    // Filled by createModuleRuntimes below, before anything reads it.
    modules: {} as AppDeps['modules'],
    runtime: new ProcessRuntime(),
  };
  await createModuleRuntimes(deps, opts.modules);
  try {
    await encryptClearSecrets(deps);
    await reencryptUnderCurrentKey(deps);
  } catch (err) {
    // Nothing runs yet: close what is open, so that the start fails cleanly (a wrong at-rest key, docs/security.md).
    await db.close().catch(() => undefined);
    await passwords.close().catch(() => undefined);
    await shared?.close().catch(() => undefined);
    throw err;
  }
  defineModuleJobs(deps);
  if (opts.startJobs !== false) {
    await jobs.start();
    await deps.runtime.startWorkers(deps);
  }
  await bootstrapOwner(deps);
  apiUsage.start();
  return deps;
}

/**
 * Secrets stored before their column was encrypted (docs/security.md, "Encryption at rest") are encrypted at start,
 * before any worker runs; until then (and for a row written by an older process meanwhile) they are read as clear.
 */
async function encryptClearSecrets(deps: AppDeps): Promise<void> {
  for (const m of modules) {
    if (!m.encryptAtRest) continue;
    const n = await m.encryptAtRest(deps);
    if (n > 0) deps.log.info({ module: m.name, rows: n }, 'encrypted secrets stored in clear');
  }
}

/**
 * Values encrypted under the previous at-rest key, or before key ids, are re-encrypted under the current key at
 * start, before any worker runs (docs/security.md, "Rotating the at-rest key"); a value no configured key opens fails
 * the start.
 */
async function reencryptUnderCurrentKey(deps: AppDeps): Promise<void> {
  const counts = await reencryptAtRest(
    deps,
    modules.flatMap((m) => m.atRest ?? []),
  );
  const rows = Object.values(counts).reduce((a, b) => a + b, 0);
  if (rows > 0) deps.log.info({ rows: counts }, 'at-rest values re-encrypted under the current key');
  if (deps.config.twoFactorKeyPrevious !== undefined) {
    deps.log.info(
      'at-rest values are under the current key; remove TWO_FACTOR_KEY_PREVIOUS once every process runs with it',
    );
  }
}

/**
 * Stops what startServices started, in reverse order: the workers, the usage counters (and Redis), the job queue (running
 * handlers finish their current job), then the database. Every step runs even if one before it failed, and each has
 * a time budget so that a stuck one cannot hang the shutdown; any failure is reported at the end. Calling it again
 * waits for the same stop.
 */
export function stopServices(deps: AppDeps): Promise<void> {
  return deps.runtime.stopOnce(() => stopInOrder(deps));
}

async function stopInOrder(deps: AppDeps): Promise<void> {
  const problems: string[] = [];
  const step = async (name: string, budgetMs: number, run: () => Promise<unknown>) => {
    let timer: NodeJS.Timeout | undefined;
    const overtime = new Promise<'overtime'>((resolve) => {
      timer = setTimeout(() => resolve('overtime'), budgetMs);
    });
    try {
      if ((await Promise.race([run(), overtime])) === 'overtime') {
        problems.push(`${name}: still stopping after ${budgetMs} ms`);
        deps.log.error({ step: name, budgetMs }, 'shutdown step took too long; going on');
      }
    } catch (err) {
      problems.push(`${name}: ${(err as Error).message}`);
      deps.log.error({ err, step: name }, 'shutdown step failed; going on');
    } finally {
      clearTimeout(timer);
    }
  };
  await step('workers', 15_000, () => deps.runtime.stopWorkers());
  await step('api usage', 5_000, () => deps.apiUsage.stop());
  const shared = deps.apiUsage.shared;
  if (shared) await step('redis', 5_000, () => shared.close());
  await step('job queue', 15_000, () => deps.jobs.stop(10_000));
  await step('module runtimes', 10_000, () => stopModuleRuntimes(deps));
  await step('database', 10_000, () => deps.db.close());
  await step('password hashing', 5_000, () => deps.passwords.close());
  await step('mail', 5_000, async () => deps.mail.close?.());
  if (problems.length > 0) throw new Error(`Shutdown incomplete: ${problems.join('; ')}`);
}
