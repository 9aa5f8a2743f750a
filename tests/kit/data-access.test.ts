import { readdirSync, readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

/**
 * Data access of docs/adding-a-module.md, held by a test: in a module, only `<m>.repository.ts` (and the entities and
 * migrations that describe the tables) reach the database. Services, jobs, routers and manifests call the repository.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MODULES = resolve(ROOT, 'server/modules');

/** Modules whose queries have not all moved to a repository yet. Empty when every module has one. */
const NOT_YET: readonly string[] = [];

/** Calls that reach the database: the EntityManager's methods, raw SQL, query builders. */
const DATA_ACCESS = new RegExp(
  [
    String.raw`\b(?:em|ctx\.em|this\.em|fork|db\.em)\s*\.\s*(?:find\w*|count|persist\w*|native\w+|insert\w*|execute|getConnection|create|flush|upsert\w*|getReference|lock|refresh|remove|fork|createQueryBuilder|qb|getKysely|transactional|begin|commit|rollback)\s*[(<]`,
    String.raw`\.execute\s*[(<]\s*['"\x60]`,
    String.raw`\bsql\s*\x60`,
    String.raw`\b(?:SELECT|INSERT INTO|UPDATE|DELETE FROM)\s+[\w"]`,
  ].join('|'),
);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = resolve(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** Files of a module that may reach the database. */
function mayQuery(file: string): boolean {
  return /\.repository\.ts$|\.entity\.ts$|[\\/]migrations?[\\/]|\.migration\.ts$/.test(file);
}

/** `file:line: text` for each line of a module's other files that reaches the database itself. */
export function directDataAccess(module: string): string[] {
  const found: string[] = [];
  for (const file of sourceFiles(resolve(MODULES, module))) {
    if (mayQuery(file)) continue;
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, i) => {
      const code = line.replace(/\/\/.*$/, '');
      if (/^\s*(\*|\/\*)/.test(code)) return;
      if (DATA_ACCESS.test(code)) found.push(`${relative(ROOT, file)}:${i + 1}: ${line.trim()}`);
    });
  }
  return found;
}

describe('kit: each module reaches its tables through its repository (docs/adding-a-module.md)', () => {
  const modules = readdirSync(MODULES, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name);

  for (const module of modules) {
    if (NOT_YET.includes(module)) continue;
    it(`${module}: has ${module}.repository.ts, and no other file queries`, () => {
      expect(
        sourceFiles(resolve(MODULES, module)).some((f) => f.endsWith(`${module}.repository.ts`)),
      ).to.equal(true, `server/modules/${module}/${module}.repository.ts`);
      expect(directDataAccess(module)).to.deep.equal([]);
    });
  }

  it('lists in NOT_YET only modules that exist and still query outside a repository', () => {
    for (const module of NOT_YET) {
      expect(modules).to.include(module);
      expect(directDataAccess(module), `${module} is done: remove it from NOT_YET`).to.not.deep.equal([]);
    }
  });
});
