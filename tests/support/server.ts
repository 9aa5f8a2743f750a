import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../server/app.js';
import type { Config } from '../../server/config.js';
import { startServices, stopServices } from '../../server/services.js';
import { createCallerFactory } from '../../server/trpc/init.js';
import type { AppDeps } from '../../server/kit/deps.js';
import { createInProcessContext } from '../../server/trpc/context.js';
import { appRouter } from '../../server/router.js';
import type { Clock } from '../../server/lib/time.js';
import type { MailDriver } from '../../server/mail/mail-driver.js';
import type { Logger } from '../../server/kit/deps.js';
import type { ModuleOverrides } from '../../server/kit/runtime.js';
import { contractObserver } from './contract.js';
import { testConfig } from './env.js';
import { migratedPgliteTemplate } from './pglite-template.js';

export interface TestServer {
  deps: AppDeps;
  app: FastifyInstance;
  port: number;
  baseUrl: string;
  /** An in-process caller with a real context, as the given bearer token. */
  caller(token?: string, opts?: { ip?: string }): Caller;
  close(): Promise<void>;
}

const createCaller = createCallerFactory(appRouter);
export type Caller = ReturnType<typeof createCaller>;

export async function startTestServer(
  opts: {
    config?: Config;
    env?: Record<string, string | undefined>;
    clock?: Clock;
    /** Outgoing mail (a MemoryMailDriver to read it); the log driver by default. */
    mail?: MailDriver;
    startJobs?: boolean;
    /** A PGlite directory that outlives the server (restart tests); in memory by default. */
    pgliteDataDir?: string;
    /** Listen address; loopback by default. */
    host?: string;
    /** The server's logger (to read what it logs); one from the config's LOG_LEVEL by default. */
    log?: Logger;
    /**
     * Pieces of modules' runtimes in place of what their `create` builds, from the start (a driver that fails on
     * purpose: `{ billing: { driver } }`). To swap one on a running server, see tests/support/module-runtime.ts.
     */
    modules?: ModuleOverrides;
  } = {},
): Promise<TestServer> {
  const config = opts.config ?? testConfig(opts.env);
  const pgliteDataDir = opts.pgliteDataDir ?? (config.databaseUrl ? undefined : 'memory://');
  const deps = await startServices(config, {
    pgliteDataDir,
    pgliteInitialData: pgliteDataDir?.startsWith('memory://') ? await migratedPgliteTemplate() : undefined,
    clock: opts.clock,
    mail: opts.mail,
    startJobs: opts.startJobs,
    log: opts.log,
    modules: opts.modules,
  });
  const app = await buildApp(deps, { observeResponse: contractObserver });
  await app.listen({ port: 0, host: opts.host ?? '127.0.0.1' });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    deps,
    app,
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    caller: (token, o = {}) => createCaller(createInProcessContext(deps, { token, ip: o.ip })),
    async close() {
      await app.close();
      await stopServices(deps);
    },
  };
}

let shared: Promise<TestServer> | undefined;

/** One server for the whole run (tests make their own data, so they can share it). Closed by the root hook. */
export function sharedServer(): Promise<TestServer> {
  shared ??= startTestServer();
  return shared;
}

export async function closeSharedServer(): Promise<void> {
  if (shared) await (await shared).close();
  shared = undefined;
}
