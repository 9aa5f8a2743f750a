import { resolve } from 'node:path';
import pino from 'pino';
import { ApiUsage } from './access/api-usage.js';
import { TokenService, resolveJwtSecret } from './access/tokens.js';
import type { Config } from './config.js';
import { openDatabase } from './db/orm.js';
import { entities } from './entities.js';
import { defineJobs, startWorkers, stopWorkers } from './jobs.js';
import { createJobQueue } from './jobs/queue.js';
import { systemClock, type Clock } from './lib/time.js';
import { LogMailDriver, type MailDriver } from './mail/mail-driver.js';
import { bootstrapOwner } from './modules/auth/auth.service.js';
import type { AppDeps, Logger } from './trpc/context.js';

export interface StartOptions {
  clock?: Clock;
  log?: Logger;
  /** Overrides the embedded database directory (tests use `memory://`). */
  pgliteDataDir?: string;
  /** Start the job workers (default true). */
  startJobs?: boolean;
  /** Outgoing mail; the log driver by default. */
  mail?: MailDriver;
}

export function createLogger(config: Config): Logger {
  return pino({
    level: config.logLevel,
    redact: ['req.headers.authorization', 'password', '*.password', '*.refresh_token', '*.token'],
  });
}

/** Config → database (migrated) → tokens → jobs → owner bootstrap. What main.ts and the tests both run. */
export async function startServices(config: Config, opts: StartOptions = {}): Promise<AppDeps> {
  const log = opts.log ?? createLogger(config);
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    pgliteDataDir: opts.pgliteDataDir ?? resolve(config.dataDir, 'pglite'),
    entities,
  });
  const tokens = new TokenService(resolveJwtSecret(config.jwtSecret, config.dataDir));
  const jobs = createJobQueue(db, log);
  const clock = opts.clock ?? systemClock;
  const apiUsage = new ApiUsage(db, clock, log, config.rateLimitBurst);
  const mail = opts.mail ?? new LogMailDriver(log);
  const deps: AppDeps = { config, db, tokens, jobs, clock, log, apiUsage, mail };
  defineJobs(jobs, deps);
  if (opts.startJobs !== false) {
    await jobs.start();
    await startWorkers(deps);
  }
  await bootstrapOwner(deps);
  apiUsage.start();
  return deps;
}

export async function stopServices(deps: AppDeps): Promise<void> {
  await stopWorkers(deps);
  await deps.apiUsage.stop();
  await deps.jobs.stop();
  await deps.db.close();
}
