// Test tier: process
import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { usingPostgres } from '../support/env.js';

const run = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const NAME = 'sample-things';
/** The module's key in `deps.modules` and its type names, as the scaffold derives them from NAME. */
const KEY = 'sampleThings';
const PASCAL = 'SampleThings';

/**
 * `npm run new-module` (server/kit/new-module.ts) writes a module in the one shape of docs/adding-a-module.md that
 * passes the kit tests as generated: one is generated into a copy of the tree (never into this one), its files are
 * checked for the shape, the copy is type-checked and the kit tests, the schema check and the module's own unit test
 * run on it (PGlite), then the copy is removed.
 */
// The scaffold's checks run on PGlite whatever the pass (below), so the PostgreSQL pass does not repeat them.
(usingPostgres ? describe.skip : describe)('the module scaffold (npm run new-module)', function () {
  this.timeout(15 * 60_000);
  let copy: string;
  let made: { stdout: string };
  const node = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
    run(process.execPath, args, { cwd: copy, env, maxBuffer: 16 * 1024 * 1024 });
  const generated = (file: string) => readFileSync(join(copy, `server/modules/${NAME}`, file), 'utf8');

  before(() => {
    copy = mkdtempSync(join(tmpdir(), 'new-module-'));
    for (const entry of [
      'server',
      'shared',
      'vpn-agent',
      'tests',
      'client-sdk',
      'package.json',
      'tsconfig.json',
      '.prettierrc.json',
    ]) {
      cpSync(join(ROOT, entry), join(copy, entry), {
        recursive: true,
        filter: (src) => !src.includes('node_modules'),
      });
    }
    symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'), 'dir');
  });

  before(async () => {
    made = await node(['--import', 'tsx', 'server/kit/new-module.ts', NAME]);
  });

  after(() => {
    if (copy) rmSync(copy, { recursive: true, force: true });
  });

  it('writes the repository, the runtime, the services and the router in the shape of the vpn module', () => {
    const repository = generated(`${NAME}.repository.ts`);
    const contract = /export interface (\w+)Repository \{([\s\S]*?)\n\}/.exec(repository);
    expect(contract?.[1]).to.equal(PASCAL);
    const methods = [...contract![2]!.matchAll(/^ {2}(\w+)\((.*?)[,)]/gm)].map((m) => `${m[1]}(${m[2]})`);
    expect(methods, 'the unit of work first on every method').to.have.length.above(0);
    for (const method of methods) expect(method, 'the unit of work first').to.match(/^\w+\((em|tx): Em\)$/);
    expect(repository).to.match(
      new RegExp(
        `export class MikroOrm${PASCAL}Repository\\s+extends MikroOrmRepository\\s+implements ${PASCAL}Repository\\s`,
      ),
    );

    const manifest = generated(`${NAME}.module.ts`);
    expect(manifest).to.match(
      new RegExp(`export interface ${PASCAL}Runtime \\{\\s+[^}]*readonly repository: ${PASCAL}Repository;`),
    );
    expect(manifest).to.match(
      new RegExp(
        `declare module '../../kit/deps.js' \\{\\s+interface ModuleRuntimes \\{\\s+${KEY}: ${PASCAL}Runtime;`,
      ),
    );
    expect(manifest).to.include(`repository: new MikroOrm${PASCAL}Repository(deps.db)`);

    // Each exported service is (ctx: ActorContext, input: T…Input) and reaches the repository through the kit.
    const service = generated(`${NAME}.service.ts`).replace(/\s+/g, ' ');
    const services = [...service.matchAll(/export async function (\w+)\(([^)]*)\)/g)];
    expect(services.map((m) => m[1])).to.have.length(4);
    for (const [, fn, params] of services) {
      const list = params!.trim().replace(/,$/, '');
      expect(`${fn}(${list})`).to.match(/^\w+\(ctx: ActorContext, input: T\w+Input\)$/);
    }
    expect(service).to.include(`repositoryOf(ctx.deps, '${KEY}')`);
    expect(service).to.include('(ctx.em,');

    // The router maps each procedure to one service call with the context and the input as they come.
    const router = generated(`${NAME}.router.ts`).replace(/\s+/g, ' ');
    const calls = [...router.matchAll(/\.(query|mutation)\((.*?)\),? (?=\w+:|\}\);)/g)].map((m) =>
      m[2]!.trim().replace(/,$/, ''),
    );
    expect(calls).to.have.length(4);
    for (const call of calls)
      expect(call).to.match(new RegExp(`^\\(\\{ ctx, input \\}\\) => ${KEY}\\.\\w+\\(ctx, input\\)$`));

    for (const file of readdirSync(join(copy, `server/modules/${NAME}`), {
      recursive: true,
      encoding: 'utf8',
    })) {
      if (!file.endsWith('.ts')) continue;
      const text = generated(file);
      expect(text, `${file}: the old per-request helper`).not.to.include('using(');
      expect(text, `${file}: a runtime read around runtimeOf/repositoryOf`).not.to.include('deps.modules');
    }
  });

  it('generates a module that type-checks and passes the kit tests, and leaves this tree alone', async () => {
    expect(made.stdout).to.include(`server/modules/${NAME}/`);
    expect(existsSync(join(copy, `server/modules/${NAME}/${NAME}.repository.ts`))).to.equal(true);
    expect(existsSync(join(ROOT, `server/modules/${NAME}`)), 'written into this tree').to.equal(false);

    // The generated files and everything they reach, as `npm run typecheck` checks them.
    writeFileSync(
      join(copy, 'tsconfig.scaffold.json'),
      JSON.stringify({
        extends: './tsconfig.json',
        include: ['server', `tests/modules/${NAME}`],
      }),
    );
    await node([
      join(ROOT, 'node_modules/typescript/bin/tsc'),
      '-p',
      'tsconfig.scaffold.json',
      '--noEmit',
    ]).catch((err: { stdout?: string }) =>
      expect.fail(`the generated module does not type-check:\n${err.stdout}`),
    );

    // On PGlite: the copy's migrations must not reach a shared PostgreSQL database.
    const env = { ...process.env };
    delete env.DATABASE_URL;
    const files = [
      'tests/kit/data-access.test.ts',
      'tests/kit/errors.test.ts',
      'tests/kit/layers.test.ts',
      'tests/kit/module-runtime.test.ts',
      'tests/kit/modules.test.ts',
      'tests/db/schema-drift.test.ts',
      `tests/modules/${NAME}/${NAME}.service.test.ts`,
    ];
    const mocha = join(ROOT, 'node_modules/mocha/bin/mocha.js');
    const result = await node(
      [
        mocha,
        '--no-config',
        '--node-option',
        'import=tsx',
        '--node-option',
        'conditions=@cloud-platform/source',
        '--require',
        'tests/support/hooks.ts',
        '--timeout',
        '120000',
        '--exit',
        '--reporter',
        'dot',
        ...files,
      ],
      env,
    ).catch((err: { stdout?: string; stderr?: string }) =>
      expect.fail(`the kit tests fail on the generated module:\n${err.stdout}\n${err.stderr}`),
    );
    expect(result.stdout).to.match(/\d+ passing/);
    expect(result.stdout).not.to.match(/failing/);
  });
});
