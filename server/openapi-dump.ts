/**
 * Writes the OpenAPI document generated from the router, without starting a server or opening a database:
 * `tsx server/openapi-dump.ts [file]` (stdout without a file). Used by `npm run lint:openapi`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { buildOpenApiDocument } from './openapi.js';

const json = `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`;
const file = process.argv[2];
if (file) {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, json);
} else {
  process.stdout.write(json);
}
