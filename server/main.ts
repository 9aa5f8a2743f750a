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

const deps = await startServices(config);
const app = await buildApp(deps);
await app.listen({ port: config.port, host: config.host });
deps.log.info(
  { url: config.publicBaseUrl, database: deps.db.kind, docs: `${config.publicBaseUrl}/docs` },
  'server listening',
);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  deps.log.info({ signal }, 'shutting down: finishing in-flight requests and jobs');
  try {
    await app.close();
    await stopServices(deps);
    process.exit(0);
  } catch (err) {
    deps.log.error({ err }, 'error during shutdown');
    process.exit(1);
  }
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
