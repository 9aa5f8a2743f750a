// Test tier: unit
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

/** Calls that reach the database: the EntityManager's methods, raw SQL, query builders. */
const DATA_ACCESS = new RegExp(
  [
    String.raw`\b(?:em|ctx\.em|this\.em|fork|db\.em)\s*\.\s*(?:find\w*|count|persist\w*|native\w+|insert\w*|execute|getConnection|create|flush|upsert\w*|getReference|lock|refresh|remove|fork|createQueryBuilder|qb|getKysely|transactional|begin|commit|rollback)\s*[(<]`,
    String.raw`\.execute\s*[(<]\s*['"\x60]`,
    String.raw`\bsql\s*\x60`,
    String.raw`\b(?:SELECT|INSERT INTO|UPDATE|DELETE FROM)\s+[\w"]`,
    // A string that starts as SQL does, in the lower case the project writes it in.
    String.raw`[\x60'"]\s*(?:select\s+(?:[\w"*(].*\sfrom\s|[\w.]+\()|insert\s+into\s|update\s+"|delete\s+from\s|with\s+\w+\s+as\s*\()`,
  ].join('|'),
);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = resolve(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/**
 * Files of a module that may reach the database: its repository, entities and migrations; and the drivers of real
 * infrastructure (`drivers/`), whose SQL goes to the database servers the module manages, never to the API's own.
 */
function mayQuery(file: string): boolean {
  return /\.repository\.ts$|\.entity\.ts$|[\\/]migrations?[\\/]|\.migration\.ts$|[\\/]drivers[\\/]/.test(
    file,
  );
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
    it(`${module}: has ${module}.repository.ts, and no other file queries`, () => {
      expect(
        sourceFiles(resolve(MODULES, module)).some((f) => f.endsWith(`${module}.repository.ts`)),
      ).to.equal(true, `server/modules/${module}/${module}.repository.ts`);
      expect(directDataAccess(module)).to.deep.equal([]);
    });
  }

  it('recognises what reaches the database, and not the prose around it', () => {
    for (const line of [
      'const rows = await ctx.em.find(User, { id });',
      "await tx.execute('select 1');",
      '  `select "id" from "users" where "id" = ?`,',
      'const n = await em.count(Site, {});',
      "  'delete from login_throttles where key = ?',",
      'await deps.db.em.fork().nativeUpdate(User, {}, {});',
    ])
      expect(DATA_ACCESS.test(line), line).to.equal(true);
    for (const line of ['const message = `select a plan first`;', 'repository.findSite(em, actor, id)'])
      expect(DATA_ACCESS.test(line), line).to.equal(false);
  });
});
