import type { Logger as PinoLogger } from 'pino';
import type { KeyRing } from '../lib/crypto.js';
import type { Actor } from '../access/actor.js';
import type { ApiUsage } from '../limits/api-usage.js';
import type { AuthEndpointLimits } from '../limits/auth-endpoint-limits.js';
import type { PasswordHasher } from '../access/passwords.js';
import type { TokenService } from '../access/tokens.js';
import type { Config } from '../config.js';
import type { Database, Em } from '../db/orm.js';
import type { EventStreamRequest } from '../lib/event-stream.js';
import type { JobQueue } from '../jobs/queue.js';
import type { MailDriver } from '../mail/mail-driver.js';
import type { Clock } from '../lib/time.js';
import type { ModuleRegistry } from './registry.js';
import type { ProcessRuntime } from './runtime.js';

/**
 * What the modules build per process (`create` in their manifests), by module name: the type of `deps.modules`.
 * The kit imports no module: each module adds its own key where it defines its runtime, by declaration merging
 * (`declare module '../../kit/deps.js' { interface ModuleRuntimes { vpn: VpnRuntime } }`), and server/modules.ts
 * checks at compile time that the keys are exactly the runtimes the manifests' `create` build.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface ModuleRuntimes {}

/** The names of the modules whose runtime holds a `repository`. */
export type ModuleWithRepository = {
  [K in keyof ModuleRuntimes]: ModuleRuntimes[K] extends { repository: unknown } ? K : never;
}[keyof ModuleRuntimes];

/** The process logger (pino, shared with Fastify). */
export type Logger = PinoLogger;

/** What every request, job or test shares: built once at start (server/services.ts), passed down explicitly. */
export interface AppDeps {
  config: Config;
  db: Database;
  tokens: TokenService;
  jobs: JobQueue;
  clock: Clock;
  log: Logger;
  /** API call counters, monthly quota and burst limit (docs/api-conventions.md, "Rate limits and quotas"). */
  apiUsage: ApiUsage;
  /** Per-address limits of the unauthenticated endpoints (docs/security.md). */
  authLimits: AuthEndpointLimits;
  /** Outgoing mail (invitations, password resets): SMTP with MAIL_URL, else the log driver. */
  mail: MailDriver;
  /** bcrypt at `BCRYPT_COST`, on worker threads. */
  passwords: PasswordHasher;
  /** What the modules declared in their manifests: owned resources, plan-feature counters, events. */
  registry: ModuleRegistry;
  /**
   * Keys for data encrypted at rest (32 bytes each): `secrets`, every secret a module stores (two-factor secrets,
   * webhook signing secrets, hosting variables), and `idempotency`, the answers kept for idempotent replays (which
   * may show a secret once).
   */
  keys: { secrets: KeyRing; idempotency: KeyRing };
  /**
   * What each module built for this process with its manifest's `create` (drivers, hubs, workers), by module name:
   * `deps.modules.hosting.driver`. Filled at start, before jobs and workers run (server/services.ts).
   */
  modules: ModuleRuntimes;
  /** The workers this process started and its stop (server/kit/runtime.ts); start and stop only. */
  runtime: ProcessRuntime;
}

/**
 * What a service function receives: the unit of work and the dependencies, nothing of the transport. Jobs, the CLI
 * and tests build one with `serviceContext(deps)`; a request's context satisfies it as it is.
 */
export interface ServiceContext {
  em: Em;
  deps: AppDeps;
}

/** Who sent the request, for the use cases that record it (login sessions, throttling). */
export interface RequestInfo {
  requestId: string;
  ip: string;
  userAgent: string | undefined;
}

/** A service call made on behalf of a request from outside (public endpoints: login, register, accept). */
export interface RequestContext extends ServiceContext, RequestInfo {
  /** Set when the caller asked a procedure that can stream for Server-Sent Events (server/lib/event-stream.ts). */
  eventStream?: EventStreamRequest;
}

/** A service call made by a signed-in caller: `actor` is never null here. */
export interface ActorContext extends RequestContext {
  actor: Actor;
}

/** A context for work that no request started (jobs, the CLI, start-up): its own unit of work. */
export function serviceContext(deps: AppDeps, em: Em = deps.db.orm.em.fork()): ServiceContext {
  return { em, deps };
}
