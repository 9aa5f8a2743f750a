// `npm run new-module -- <name> [--prefix <id prefix>]`: writes a module in the one shape of docs/adding-a-module.md
// (the vpn module's) and registers it (server/modules.ts, server/router.ts, the id prefix in server/lib/ids.ts). Its
// resource is an item with a name, kept per organization: rename and extend it. The result passes the kit tests as
// written (tests/kit/new-module.test.ts generates one into a copy of the tree and runs them on it).
//
//   server/modules/<name>/<name>.module.ts       the manifest: its runtime (the repository), built by create(deps)
//   server/modules/<name>/<name>.entity.ts       the table, as the ORM sees it
//   server/modules/<name>/<name>.repository.ts   every query: an interface (the unit of work first on every method)
//                                                and its MikroORM version (extends the kit's MikroOrmRepository)
//   server/modules/<name>/<name>.service.ts      the use cases, (ctx, input), through repositoryOf(ctx.deps, '<key>')
//   server/modules/<name>/<name>.schema.ts       inputs and outputs (zod)
//   server/modules/<name>/<name>.router.ts       the procedures, each one service call, errors by code in meta.errors
//   server/modules/<name>/migrations/…           the table, as the database gets it
//   tests/modules/<name>/<name>.service.test.ts  the service against an in-memory repository, no server
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function fail(message: string): never {
  console.error(`new-module: ${message}`);
  process.exit(1);
}

const args = process.argv.slice(2);
const prefixAt = args.indexOf('--prefix');
const prefixArg = prefixAt === -1 ? undefined : args[prefixAt + 1];
const name = args.find((a, i) => !a.startsWith('--') && (prefixAt === -1 || i !== prefixAt + 1));
if (!name || !/^[a-z][a-z0-9]*(-[a-z0-9]+)*$/.test(name)) {
  fail('usage: npm run new-module -- <name> [--prefix <id prefix>]   (<name>: lowercase words joined by -)');
}
const camel = name.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
const pascal = camel[0]!.toUpperCase() + camel.slice(1);
const snake = name.replaceAll('-', '_');
const prefix = prefixArg ?? name.replaceAll('-', '').slice(0, 4);
if (!/^[a-z]{2,8}$/.test(prefix)) fail(`the id prefix "${prefix}" must be 2 to 8 lowercase letters`);
const entity = `${pascal}Item`;
const table = `${snake}_items`;
const dir = join(ROOT, 'server/modules', name);
const testDir = join(ROOT, 'tests/modules', name);
if (existsSync(dir)) fail(`server/modules/${name} exists already`);

const idsFile = join(ROOT, 'server/lib/ids.ts');
const ids = readFileSync(idsFile, 'utf8');
if (new RegExp(`\\| '${prefix}'\\s*[|;]`).test(ids))
  fail(`the id prefix "${prefix}" is taken: pass --prefix`);
const modulesFile = join(ROOT, 'server/modules.ts');
const routerFile = join(ROOT, 'server/router.ts');
const modulesTs = readFileSync(modulesFile, 'utf8');
const routerTs = readFileSync(routerFile, 'utf8');
if (new RegExp(`\\b${camel}Module\\b`).test(modulesTs))
  fail(`${camel}Module is in server/modules.ts already`);
if (new RegExp(`^\\s+${camel}:`, 'm').test(routerTs)) fail(`server/router.ts routes "${camel}" already`);

const stamp = new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14);
const migration = `Migration${stamp}_${snake}`;

const files: Record<string, string> = {};

files[`${name}.entity.ts`] = `import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { BaseSchema } from '../../db/base.entity.js';

/** An item of the ${name} module, kept per organization. The migration creates the same table. */
export const ${entity}Schema = defineEntity({
  name: '${entity}',
  tableName: '${table}',
  extends: BaseSchema,
  uniques: [{ name: '${table}_organization_id_name_unique', properties: ['organization', 'name'] }],
  properties: {
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    name: p.string().length(100),
  },
});
export class ${entity} extends ${entity}Schema.class {}
${entity}Schema.setClass(${entity});
`;

files[`migrations/${migration}.ts`] = `import { Migration } from '@mikro-orm/migrations';

export class ${migration} extends Migration {
  override name = '${migration}';

  override up(): void {
    this.addSql(\`
      create table "${table}" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "name" varchar(100) not null
      );\`);
    this.addSql(
      \`create unique index "${table}_organization_id_name_unique" on "${table}" ("organization_id", "name");\`,
    );
  }
}
`;

files[`${name}.repository.ts`] = `import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { Em } from '../../db/orm.js';
import { findPage, type Paged } from '../../db/pagination.js';
import { MikroOrmRepository } from '../../kit/repository.js';
import type { PageRequest } from '../../lib/pagination.js';
import { ${entity} } from './${name}.entity.js';

/** An item as the service sees it: plain data, whichever repository read it. */
export interface ${entity}Record {
  id: string;
  organizationId: string;
  name: string;
  createdAt: Date;
}

/**
 * Every read and write of the ${name} module's table (docs/adding-a-module.md, "Checklist", step 3). Each method takes
 * the unit of work first (the service's \`ctx.em\`, or the \`tx\` of a transaction). The services know only this
 * interface: the process gets the MikroORM version below from the module's \`create\`, a unit test an in-memory one.
 */
export interface ${pascal}Repository {
  /** A page of the organization's items, newest first. */
  list(em: Em, organizationId: string, page: PageRequest): Promise<Paged<${entity}Record>>;
  get(em: Em, organizationId: string, id: string): Promise<${entity}Record | null>;
  /** False when the organization has an item of that name already. */
  add(em: Em, item: ${entity}Record): Promise<boolean>;
  /** False when there was no such item. */
  remove(em: Em, organizationId: string, id: string): Promise<boolean>;
}

function toRecord(row: ${entity}): ${entity}Record {
  return { id: row.id, organizationId: row.organization.id, name: row.name, createdAt: row.createdAt };
}

/** The repository of the process, built once by the module's \`create\` on the process's database. */
export class MikroOrm${pascal}Repository extends MikroOrmRepository implements ${pascal}Repository {
  async list(em: Em, organizationId: string, page: PageRequest): Promise<Paged<${entity}Record>> {
    const found = await findPage(em, ${entity}, { organization: organizationId }, page);
    return { ...found, items: found.items.map(toRecord) };
  }

  async get(em: Em, organizationId: string, id: string): Promise<${entity}Record | null> {
    const row = await em.findOne(${entity}, { id, organization: organizationId });
    return row ? toRecord(row) : null;
  }

  async add(em: Em, item: ${entity}Record): Promise<boolean> {
    try {
      await em.insert(${entity}, {
        id: item.id,
        organization: item.organizationId,
        name: item.name,
        createdAt: item.createdAt,
        updatedAt: item.createdAt,
      });
      return true;
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) return false;
      throw err;
    }
  }

  async remove(em: Em, organizationId: string, id: string): Promise<boolean> {
    return (await em.nativeDelete(${entity}, { id, organization: organizationId })) > 0;
  }
}
`;

files[`${name}.schema.ts`] = `import { z } from 'zod';
import { pageQueryShape, pageResponse } from '../../lib/pagination.js';
import { okResponse, zPathId } from '../../lib/schema.js';

const ZId = zPathId('${prefix}', '${pascal} item');

// ---------- inputs ----------

export const ZList${entity}sInput = z.object({ ...pageQueryShape });
export type TList${entity}sInput = z.infer<typeof ZList${entity}sInput>;

export const ZCreate${entity}Input = z.strictObject({
  name: z.string().trim().min(1).max(100).describe('1 to 100 characters, unique in the organization'),
});
export type TCreate${entity}Input = z.infer<typeof ZCreate${entity}Input>;

export const Z${entity}IdInput = z.object({ id: ZId });
export type T${entity}IdInput = z.infer<typeof Z${entity}IdInput>;

// ---------- outputs ----------

export const Z${entity} = z
  .object({
    id: z.string().describe('\`${prefix}_…\`'),
    name: z.string(),
    created_at: z.string(),
  })
  .meta({ id: '${entity}' });
export type T${entity} = z.infer<typeof Z${entity}>;

export const Z${entity}Output = okResponse({ item: Z${entity} });
export type T${entity}Output = z.infer<typeof Z${entity}Output>;
export const ZList${entity}sOutput = pageResponse('items', Z${entity});
export type TList${entity}sOutput = z.infer<typeof ZList${entity}sOutput>;
export const ZDelete${entity}Output = okResponse({ message: z.string() });
export type TDelete${entity}Output = z.infer<typeof ZDelete${entity}Output>;
`;

files[`${name}.service.ts`] = `import type { ActorContext } from '../../kit/deps.js';
import { repositoryOf } from '../../kit/runtime.js';
import { conflict, notFound } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import type { ${entity}Record } from './${name}.repository.js';
import type {
  TCreate${entity}Input,
  TDelete${entity}Output,
  T${entity},
  T${entity}IdInput,
  T${entity}Output,
  TList${entity}sInput,
  TList${entity}sOutput,
} from './${name}.schema.js';

const itemNotFound = () => notFound('${pascal} item');

function toDto(item: ${entity}Record): T${entity} {
  return { id: item.id, name: item.name, created_at: item.createdAt.toISOString() };
}

export async function list${entity}s(
  ctx: ActorContext,
  input: TList${entity}sInput,
): Promise<TList${entity}sOutput> {
  const request = pageRequest(input);
  const found = await repositoryOf(ctx.deps, '${camel}').list(ctx.em, ctx.actor.organizationId, request);
  return { success: true, items: found.items.map(toDto), ...pageFields(request, found) };
}

export async function get${entity}(ctx: ActorContext, input: T${entity}IdInput): Promise<T${entity}Output> {
  const item = await repositoryOf(ctx.deps, '${camel}').get(ctx.em, ctx.actor.organizationId, input.id);
  if (!item) throw itemNotFound();
  return { success: true, item: toDto(item) };
}

export async function create${entity}(
  ctx: ActorContext,
  input: TCreate${entity}Input,
): Promise<T${entity}Output> {
  const item: ${entity}Record = {
    id: newId('${prefix}'),
    organizationId: ctx.actor.organizationId,
    name: input.name,
    createdAt: ctx.deps.clock.now(),
  };
  if (!(await repositoryOf(ctx.deps, '${camel}').add(ctx.em, item))) {
    throw conflict(\`An item named "\${input.name}" exists already\`);
  }
  return { success: true, item: toDto(item) };
}

export async function delete${entity}(
  ctx: ActorContext,
  input: T${entity}IdInput,
): Promise<TDelete${entity}Output> {
  const removed = await repositoryOf(ctx.deps, '${camel}').remove(ctx.em, ctx.actor.organizationId, input.id);
  if (!removed) throw itemNotFound();
  return { success: true, message: '${pascal} item deleted' };
}
`;

files[`${name}.router.ts`] = `import { router } from '../../trpc/init.js';
import { authedProcedure, requireRole } from '../../trpc/procedures.js';
import {
  ZCreate${entity}Input,
  ZDelete${entity}Output,
  Z${entity}IdInput,
  Z${entity}Output,
  ZList${entity}sInput,
  ZList${entity}sOutput,
} from './${name}.schema.js';
import * as ${camel} from './${name}.service.js';

const tags = ['${pascal}'];

export const ${camel}Router = router({
  list: authedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/${name}',
        tags,
        summary: "The organization's items",
        description: 'Newest first, paged.',
      },
    })
    .input(ZList${entity}sInput)
    .output(ZList${entity}sOutput)
    .query(({ ctx, input }) => ${camel}.list${entity}s(ctx, input)),

  get: authedProcedure
    .meta({
      openapi: { method: 'GET', path: '/${name}/{id}', tags, summary: 'An item', description: 'The item by its id.' },
    })
    .input(Z${entity}IdInput)
    .output(Z${entity}Output)
    .query(({ ctx, input }) => ${camel}.get${entity}(ctx, input)),

  create: requireRole('owner', 'admin')
    .meta({
      openapi: {
        method: 'POST',
        path: '/${name}',
        tags,
        summary: 'Create an item',
        description: 'A name unique in the organization.',
      },
      errors: { CONFLICT: 'The organization has an item of this name already' },
      successStatus: 201,
      location: '/${name}/{item.id}',
    })
    .input(ZCreate${entity}Input)
    .output(Z${entity}Output)
    .mutation(({ ctx, input }) => ${camel}.create${entity}(ctx, input)),

  delete: requireRole('owner', 'admin')
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/${name}/{id}',
        tags,
        summary: 'Delete an item',
        description: 'The item is gone at once.',
      },
    })
    .input(Z${entity}IdInput)
    .output(ZDelete${entity}Output)
    .mutation(({ ctx, input }) => ${camel}.delete${entity}(ctx, input)),
});
`;

files[`${name}.module.ts`] = `import type { AppDeps } from '../../kit/deps.js';
import { defineModule, type ModuleManifest } from '../../kit/module.js';
import { ${entity} } from './${name}.entity.js';
import { MikroOrm${pascal}Repository, type ${pascal}Repository } from './${name}.repository.js';
import { ${camel}Router } from './${name}.router.js';
import { ${migration} } from './migrations/${migration}.js';

/** What the ${name} module keeps per process, built once at start by \`create\`. */
export interface ${pascal}Runtime {
  /** Every read and write of the module's table (${name}.repository.ts). */
  readonly repository: ${pascal}Repository;
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    ${camel}: ${pascal}Runtime;
  }
}

/** The ${name} module (docs/adding-a-module.md). */
// Typed by its name and runtime (not inferred): server/modules.ts checks them against \`ModuleRuntimes\` above.
export const ${camel}Module: ModuleManifest<'${camel}', ${pascal}Runtime> = defineModule({
  name: '${camel}',
  // Runs once at start; a driver would be chosen from the configuration here (\`create: (deps, config) => …\`).
  create: (deps: AppDeps): ${pascal}Runtime => ({
    repository: new MikroOrm${pascal}Repository(deps.db),
  }),
  router: ${camel}Router,
  entities: [${entity}],
  migrations: [{ name: '${migration}', class: ${migration} }],
  organizationRows: { remove: [{ table: '${table}' }] },
});
`;

const unitTest = `// Test tier: unit
import { expect } from 'chai';
import type { Actor } from '../../../server/access/actor.js';
import type { Em } from '../../../server/db/orm.js';
import type { Paged } from '../../../server/db/pagination.js';
import { unknownCursor } from '../../../server/db/raw-page.js';
import type { ActorContext, AppDeps } from '../../../server/kit/deps.js';
import type { PageRequest } from '../../../server/lib/pagination.js';
import type { ${pascal}Runtime } from '../../../server/modules/${name}/${name}.module.js';
import type {
  ${entity}Record,
  ${pascal}Repository,
} from '../../../server/modules/${name}/${name}.repository.js';
import * as ${camel} from '../../../server/modules/${name}/${name}.service.js';
import { appRejection, unitActor } from '../../support/unit.js';

/** The repository in memory: the service's rules, tested without a database or a server. */
class InMemory${pascal}Repository implements ${pascal}Repository {
  readonly rows: ${entity}Record[] = [];

  async list(_em: Em, organizationId: string, page: PageRequest): Promise<Paged<${entity}Record>> {
    const all = this.rows
      .filter((r) => r.organizationId === organizationId)
      .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1));
    let from = (page.page - 1) * page.limit;
    if (page.startingAfter !== undefined) {
      from = all.findIndex((r) => r.id === page.startingAfter) + 1;
      if (from === 0) throw unknownCursor();
    }
    const items = all.slice(from, from + page.limit);
    return { items, total: all.length, hasMore: from + page.limit < all.length };
  }

  async get(_em: Em, organizationId: string, id: string) {
    return this.rows.find((r) => r.organizationId === organizationId && r.id === id) ?? null;
  }

  async add(_em: Em, item: ${entity}Record) {
    if (this.rows.some((r) => r.organizationId === item.organizationId && r.name === item.name)) return false;
    this.rows.push(item);
    return true;
  }

  async remove(_em: Em, organizationId: string, id: string) {
    const at = this.rows.findIndex((r) => r.organizationId === organizationId && r.id === id);
    if (at === -1) return false;
    this.rows.splice(at, 1);
    return true;
  }
}

/** The module's runtime with the in-memory repository, and a caller's context on it. */
function harness() {
  const repo = new InMemory${pascal}Repository();
  const clock = { t: Date.parse('2026-01-01T00:00:00.000Z') };
  const runtime: ${pascal}Runtime = { repository: repo };
  const deps = {
    clock: { now: () => new Date(clock.t) },
    modules: { ${camel}: runtime },
  } as unknown as AppDeps;
  const ctx = (actor: Actor): ActorContext => ({
    em: {} as Em,
    deps,
    actor,
    requestId: 'req',
    ip: '127.0.0.1',
    userAgent: undefined,
  });
  return { repo, clock, ctx };
}

const firstPage = { limit: 20 } as const;

describe('${name} service (in-memory repository)', () => {
  it('creates, lists, reads and deletes the items of the organization', async () => {
    const h = harness();
    const ctx = h.ctx(unitActor());
    const { item } = await ${camel}.create${entity}(ctx, { name: 'First' });
    expect(item).to.include({ name: 'First', created_at: '2026-01-01T00:00:00.000Z' });
    expect(await ${camel}.list${entity}s(ctx, firstPage)).to.deep.include({ items: [item], total: 1 });
    expect((await ${camel}.get${entity}(ctx, { id: item.id })).item).to.deep.equal(item);
    await ${camel}.delete${entity}(ctx, { id: item.id });
    expect((await ${camel}.list${entity}s(ctx, firstPage)).items).to.deep.equal([]);
  });

  it('lists newest first, a page at a time', async () => {
    const h = harness();
    const ctx = h.ctx(unitActor());
    const { item: older } = await ${camel}.create${entity}(ctx, { name: 'Older' });
    h.clock.t += 1000;
    const { item: newer } = await ${camel}.create${entity}(ctx, { name: 'Newer' });
    const first = await ${camel}.list${entity}s(ctx, { limit: 1 });
    expect(first).to.deep.include({ items: [newer], total: 2, page: 1, has_more: true });
    const next = await ${camel}.list${entity}s(ctx, { limit: 1, starting_after: newer.id });
    expect(next).to.deep.include({ items: [older], page: null, has_more: false });
  });

  it('refuses a second item of the same name (409) and hides other organizations\\' items (404)', async () => {
    const h = harness();
    const ctx = h.ctx(unitActor());
    const { item } = await ${camel}.create${entity}(ctx, { name: 'Same' });
    expect((await appRejection(${camel}.create${entity}(ctx, { name: 'Same' }))).code).to.equal('CONFLICT');
    const other = h.ctx(unitActor());
    expect((await appRejection(${camel}.get${entity}(other, { id: item.id }))).code).to.equal('NOT_FOUND');
    expect((await appRejection(${camel}.delete${entity}(other, { id: item.id }))).code).to.equal('NOT_FOUND');
  });
});
`;

/** The file's text as the project's Prettier settings write it. */
async function formatted(file: string, text: string): Promise<string> {
  const prettier = await import('prettier');
  return prettier.format(text, { ...(await prettier.resolveConfig(file)), filepath: file });
}

mkdirSync(join(dir, 'migrations'), { recursive: true });
for (const [file, text] of Object.entries(files)) {
  writeFileSync(join(dir, file), await formatted(join(dir, file), text));
}
mkdirSync(testDir, { recursive: true });
const testFile = join(testDir, `${name}.service.test.ts`);
writeFileSync(testFile, await formatted(testFile, unitTest));

// Registered: the manifest before the core (which stays last), the router, the id prefix.
writeFileSync(
  modulesFile,
  modulesTs
    .replace(
      /^import .*\n(?![\s\S]*^import )/m,
      `$&import { ${camel}Module } from './modules/${name}/${name}.module.js';\n`,
    )
    .replace(/\n(\s+)coreModule,\n/, `\n$1${camel}Module,\n$1coreModule,\n`),
);
writeFileSync(
  routerFile,
  routerTs
    .replace(
      /\nimport \{ router \}/,
      `\nimport { ${camel}Router } from './modules/${name}/${name}.router.js';$&`,
    )
    .replace(/\n\}\);\n/, `\n  ${camel}: ${camel}Router,\n});\n`),
);
writeFileSync(idsFile, ids.replace(/\n(\s+)\| '([a-z]+)';\n/, `\n$1| '$2'\n$1| '${prefix}';\n`));

console.log(`new-module: wrote server/modules/${name}/ and tests/modules/${name}/; registered ${camel}Module in
server/modules.ts, ${camel}Router in server/router.ts and the id prefix "${prefix}" in server/lib/ids.ts.
Next: rename the item, add the security and audit fixtures of its operations (docs/adding-a-module.md,
checklist 10), run the kit tests (tests/kit) and its unit test.`);
