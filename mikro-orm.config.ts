import { loadConfig } from './server/config.js';
import { ormOptions } from './server/db/orm.js';
import { entities } from './server/entities.js';

// Used by the MikroORM CLI (for instance `npx mikro-orm debug`); the server builds the same options in server/main.ts.
const config = loadConfig();
export default await ormOptions({
  databaseUrl: config.databaseUrl,
  pgliteDataDir: `${config.dataDir}/pglite`,
  entities,
});
