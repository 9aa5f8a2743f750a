import { loadConfig } from './server/config.js';
import { ormOptions } from './server/db/orm.js';
import { buildRegistry } from './server/kit/registry.js';
import { modules } from './server/modules.js';

// Used by the MikroORM CLI (for instance `npx mikro-orm debug`); the server builds the same options in server/main.ts.
const config = loadConfig();
const registry = buildRegistry(modules);
export default await ormOptions({
  databaseUrl: config.databaseUrl,
  pgliteDataDir: `${config.dataDir}/pglite`,
  entities: [...registry.entities],
  migrations: [...registry.migrations],
});
