// `npm run new-module -- <name> [--prefix <id prefix>]`: writes a module that follows docs/adding-a-module.md and
// registers it (server/modules.ts, server/router.ts, the id prefix in server/lib/ids.ts). Its resource is an item
// with a name, kept per organization: rename and extend it. The result passes the kit tests as written
// (tests/kit/new-module.test.ts generates one into a copy of the tree and runs them on it).
//
//   server/modules/<name>/<name>.module.ts       the manifest: create(deps, config), router, entities, migrations
//   server/modules/<name>/<name>.entity.ts       the table, as the ORM sees it
//   server/modules/<name>/<name>.repository.ts   every query of the module: an interface and its MikroORM version
//   server/modules/<name>/<name>.service.ts      the use cases, against the repository interface
//   server/modules/<name>/<name>.schema.ts       inputs and outputs (zod)
//   server/modules/<name>/<name>.router.ts       the procedures, errors declared by code in meta.errors
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
import { ${entity} } from './${name}.entity.js';

/** An item as the service sees it: plain data, whichever repository read it. */
export interface ${entity}Record {
  id: string;
  organizationId: string;
  name: string;
  createdAt: Date;
}

/**
 * Every query of the ${name} module (docs/adding-a-module.md, "Repository"). The service knows only this
 * interface: the MikroORM version below serves requests, an in-memory one serves the service's unit tests.
 */
export interface ${pascal}Repository {
  /** The organization's items, newest first. */
  list(organizationId: string): Promise<${entity}Record[]>;
  get(organizationId: string, id: string): Promise<${entity}Record | null>;
  /** False when the organization has an item of that name already. */
  add(item: ${entity}Record): Promise<boolean>;
  /** False when there was no such item. */
  remove(organizationId: string, id: string): Promise<boolean>;
}

function toRecord(row: ${entity}): ${entity}Record {
  return { id: row.id, organizationId: row.organization.id, name: row.name, createdAt: row.createdAt };
}

/** The repository on the request's unit of work. */
export class MikroOrm${pascal}Repository implements ${pascal}Repository {
  constructor(private readonly em: Em) {}

  async list(organizationId: string): Promise<${entity}Record[]> {
    const rows = await this.em.find(
      ${entity},
      { organization: organizationId },
      { orderBy: { createdAt: 'desc', id: 'desc' } },
    );
    return rows.map(toRecord);
  }

  async get(organizationId: string, id: string): Promise<${entity}Record | null> {
    const row = await this.em.findOne(${entity}, { id, organization: organizationId });
    return row ? toRecord(row) : null;
  }

  async add(item: ${entity}Record): Promise<boolean> {
    try {
      await this.em.insert(${entity}, {
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

  async remove(organizationId: string, id: string): Promise<boolean> {
    return (await this.em.nativeDelete(${entity}, { id, organization: organizationId })) > 0;
  }
}
`;

files[`${name}.schema.ts`] = `import { z } from 'zod';
import { zPathId } from '../../lib/schema.js';

const ZId = zPathId('${prefix}', '${pascal} item');

export const ZCreate${entity}Input = z.strictObject({
  name: z.string().trim().min(1).max(100).describe('1 to 100 characters, unique in the organization'),
});
export type TCreate${entity}Input = z.infer<typeof ZCreate${entity}Input>;

export const Z${entity}IdInput = z.object({ id: ZId });
export type T${entity}IdInput = z.infer<typeof Z${entity}IdInput>;

export const Z${entity} = z
  .object({
    id: z.string().describe('\`${prefix}_…\`'),
    name: z.string(),
    created_at: z.string(),
  })
  .meta({ id: '${entity}' });

export const Z${entity}Output = z.object({ success: z.literal(true), item: Z${entity} });
export const ZList${entity}sOutput = z.object({
  success: z.literal(true),
  items: z.array(Z${entity}),
  total: z.number().int(),
});
export const ZDelete${entity}Output = z.object({ success: z.literal(true), message: z.string() });
`;

files[`${name}.service.ts`] = `import { conflict, notFound } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import type { ${entity}Record, ${pascal}Repository } from './${name}.repository.js';
import type { TCreate${entity}Input, T${entity}IdInput } from './${name}.schema.js';

/** Who calls and when: all the service needs of a request besides its repository. */
export interface ${pascal}Call {
  organizationId: string;
  now: Date;
}

function toDto(item: ${entity}Record) {
  return { id: item.id, name: item.name, created_at: item.createdAt.toISOString() };
}

export async function list${entity}s(repo: ${pascal}Repository, call: ${pascal}Call) {
  const items = await repo.list(call.organizationId);
  return { success: true as const, items: items.map(toDto), total: items.length };
}

export async function get${entity}(repo: ${pascal}Repository, call: ${pascal}Call, input: T${entity}IdInput) {
  const item = await repo.get(call.organizationId, input.id);
  if (!item) throw notFound('${pascal} item');
  return { success: true as const, item: toDto(item) };
}

export async function create${entity}(
  repo: ${pascal}Repository,
  call: ${pascal}Call,
  input: TCreate${entity}Input,
) {
  const item = { id: newId('${prefix}'), organizationId: call.organizationId, name: input.name, createdAt: call.now };
  if (!(await repo.add(item))) throw conflict(\`An item named "\${input.name}" exists already\`);
  return { success: true as const, item: toDto(item) };
}

export async function delete${entity}(repo: ${pascal}Repository, call: ${pascal}Call, input: T${entity}IdInput) {
  if (!(await repo.remove(call.organizationId, input.id))) throw notFound('${pascal} item');
  return { success: true as const, message: '${pascal} item deleted' };
}
`;

files[`${name}.router.ts`] = `import type { ActorContext } from '../../kit/deps.js';
import { router } from '../../trpc/init.js';
import { authedProcedure, requireRole } from '../../trpc/procedures.js';
import type { ${pascal}Repository } from './${name}.repository.js';
import {
  ZCreate${entity}Input,
  ZDelete${entity}Output,
  Z${entity}IdInput,
  Z${entity}Output,
  ZList${entity}sOutput,
} from './${name}.schema.js';
import * as ${camel} from './${name}.service.js';
import type { ${pascal}Call } from './${name}.service.js';

const tags = ['${pascal}'];

/**
 * The repository of the request (built by the module's runtime) and who calls. Its type is written out: the type of
 * \`deps.modules\` is derived from the manifests, this router's among them.
 */
function using(ctx: ActorContext): [${pascal}Repository, ${pascal}Call] {
  const repo = ctx.deps.modules.${camel}.repository(ctx.em);
  return [repo, { organizationId: ctx.actor.organizationId, now: ctx.deps.clock.now() }];
}

export const ${camel}Router = router({
  list: authedProcedure
    .meta({ openapi: { method: 'GET', path: '/${name}', tags, summary: "The organization's items" } })
    .output(ZList${entity}sOutput)
    .query(({ ctx }) => ${camel}.list${entity}s(...using(ctx))),

  get: authedProcedure
    .meta({ openapi: { method: 'GET', path: '/${name}/{id}', tags, summary: 'An item' } })
    .input(Z${entity}IdInput)
    .output(Z${entity}Output)
    .query(({ ctx, input }) => ${camel}.get${entity}(...using(ctx), input)),

  create: requireRole('owner', 'admin')
    .meta({
      openapi: { method: 'POST', path: '/${name}', tags, summary: 'Create an item' },
      errors: { CONFLICT: 'The organization has an item of this name already' },
      successStatus: 201,
      location: '/${name}/{item.id}',
    })
    .input(ZCreate${entity}Input)
    .output(Z${entity}Output)
    .mutation(({ ctx, input }) => ${camel}.create${entity}(...using(ctx), input)),

  delete: requireRole('owner', 'admin')
    .meta({ openapi: { method: 'DELETE', path: '/${name}/{id}', tags, summary: 'Delete an item' } })
    .input(Z${entity}IdInput)
    .output(ZDelete${entity}Output)
    .mutation(({ ctx, input }) => ${camel}.delete${entity}(...using(ctx), input)),
});
`;

files[`${name}.module.ts`] = `import type { Em } from '../../db/orm.js';
import { defineModule } from '../../kit/module.js';
import { ${entity} } from './${name}.entity.js';
import { MikroOrm${pascal}Repository, type ${pascal}Repository } from './${name}.repository.js';
import { ${camel}Router } from './${name}.router.js';
import { ${migration} } from './migrations/${migration}.js';

/** What the module keeps per process: built once by create, read as \`deps.modules.${camel}\`. */
export interface ${pascal}Runtime {
  /** The repository on a unit of work (a driver chosen from the configuration would be chosen here too). */
  repository(em: Em): ${pascal}Repository;
}

/** The ${name} module (docs/adding-a-module.md). */
export const ${camel}Module = defineModule({
  name: '${camel}',
  // create(deps, config): runs once at start; a driver would be chosen from \`config\` here.
  create: (): ${pascal}Runtime => ({ repository: (em) => new MikroOrm${pascal}Repository(em) }),
  router: ${camel}Router,
  entities: [${entity}],
  migrations: [{ name: '${migration}', class: ${migration} }],
  organizationRows: { remove: [{ table: '${table}' }] },
});
`;

const unitTest = `import { expect } from 'chai';
import { AppError } from '../../../server/lib/errors.js';
import type {
  ${entity}Record,
  ${pascal}Repository,
} from '../../../server/modules/${name}/${name}.repository.js';
import * as ${camel} from '../../../server/modules/${name}/${name}.service.js';

/** The repository in memory: the service's rules, tested without a database or a server. */
class InMemory${pascal}Repository implements ${pascal}Repository {
  readonly rows: ${entity}Record[] = [];

  async list(organizationId: string) {
    return this.rows
      .filter((r) => r.organizationId === organizationId)
      .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1));
  }

  async get(organizationId: string, id: string) {
    return this.rows.find((r) => r.organizationId === organizationId && r.id === id) ?? null;
  }

  async add(item: ${entity}Record) {
    if (this.rows.some((r) => r.organizationId === item.organizationId && r.name === item.name)) return false;
    this.rows.push(item);
    return true;
  }

  async remove(organizationId: string, id: string) {
    const at = this.rows.findIndex((r) => r.organizationId === organizationId && r.id === id);
    if (at === -1) return false;
    this.rows.splice(at, 1);
    return true;
  }
}

describe('${name} service (in-memory repository)', () => {
  const call = { organizationId: 'org_a', now: new Date('2026-01-01T00:00:00.000Z') };

  it('creates, lists, reads and deletes the items of the organization', async () => {
    const repo = new InMemory${pascal}Repository();
    const { item } = await ${camel}.create${entity}(repo, call, { name: 'First' });
    expect(item).to.include({ name: 'First', created_at: call.now.toISOString() });
    expect((await ${camel}.list${entity}s(repo, call)).total).to.equal(1);
    expect((await ${camel}.get${entity}(repo, call, { id: item.id })).item).to.deep.equal(item);
    await ${camel}.delete${entity}(repo, call, { id: item.id });
    expect((await ${camel}.list${entity}s(repo, call)).items).to.deep.equal([]);
  });

  it('refuses a second item of the same name (409) and hides other organizations\\' items (404)', async () => {
    const repo = new InMemory${pascal}Repository();
    const { item } = await ${camel}.create${entity}(repo, call, { name: 'Same' });
    const again = await ${camel}.create${entity}(repo, call, { name: 'Same' }).catch((e: unknown) => e);
    expect(again).to.be.instanceOf(AppError).and.to.include({ code: 'CONFLICT' });
    const other = { ...call, organizationId: 'org_b' };
    const hidden = await ${camel}.get${entity}(repo, other, { id: item.id }).catch((e: unknown) => e);
    expect(hidden).to.be.instanceOf(AppError).and.to.include({ code: 'NOT_FOUND' });
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
