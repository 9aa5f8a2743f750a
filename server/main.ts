import { buildApp } from './app.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { startServices, stopServices } from './services.js';

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(1);
  }
  throw err;
}

let deps: Awaited<ReturnType<typeof startServices>>;
let app: Awaited<ReturnType<typeof buildApp>>;
try {
  deps = await startServices(config);
  app = await buildApp(deps);
  await app.listen({ port: config.port, host: config.host });
} catch (err) {
  // One readable line (database unreachable, port in use, ...): the details go to the debug log only.
  const e = err as NodeJS.ErrnoException;
  const reason =
    e.code === 'EADDRINUSE'
      ? `${config.host}:${config.port} is already in use (PORT, HOST)`
      : e.code === 'EACCES'
        ? `no permission to listen on ${config.host}:${config.port} (PORT, HOST)`
        : e.message;
  console.error(`Start failed: ${reason}`);
  if (config.logLevel === 'debug' || config.logLevel === 'trace') console.error(err);
  process.exit(1);
}
deps.log.info(
  { url: config.publicBaseUrl, database: deps.db.kind, docs: `${config.publicBaseUrl}/docs` },
  'server listening',
);

/** Past this, something is stuck: exit non-zero rather than hang (orchestrators send SIGKILL after 30 s). */
const SHUTDOWN_BUDGET_MS = 25_000;

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) {
    // A second Ctrl-C means now.
    if (signal === 'SIGINT') process.exit(130);
    return;
  }
  stopping = true;
  deps.log.info({ signal }, 'shutting down: finishing in-flight requests and jobs');
  setTimeout(() => {
    deps.log.error({ budgetMs: SHUTDOWN_BUDGET_MS }, 'shutdown took too long; exiting');
    process.exit(1);
  }, SHUTDOWN_BUDGET_MS).unref();
  try {
    // No new connections; requests in flight get their responses. Fastify closes the idle keep-alive connections
    // once, when the close begins: a connection whose request was still in flight only becomes idle after its
    // response, and would hold the close open until its keep-alive timeout, so keep sweeping until it is done.
    const sweep = setInterval(() => app.server.closeIdleConnections(), 100);
    try {
      await app.close();
    } finally {
      clearInterval(sweep);
    }
    await stopServices(deps);
    deps.log.info('stopped');
    process.exit(0);
  } catch (err) {
    deps.log.error({ err }, 'error during shutdown');
    process.exit(1);
  }
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
