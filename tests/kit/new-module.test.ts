import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { usingPostgres } from '../support/env.js';

const run = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const NAME = 'sample-things';

/**
 * `npm run new-module` (server/kit/new-module.ts) writes a module that passes the kit tests as generated: one is
 * generated into a copy of the tree (never into this one), which is type-checked and on which the kit tests, the
 * schema check and the module's own unit test run (PGlite), then the copy is removed.
 */
// The scaffold's checks run on PGlite whatever the pass (below), so the PostgreSQL pass does not repeat them.
(usingPostgres ? describe.skip : describe)('the module scaffold (npm run new-module)', function () {
  this.timeout(15 * 60_000);
  let copy: string;

  before(() => {
    copy = mkdtempSync(join(tmpdir(), 'new-module-'));
    for (const entry of ['server', 'tests', 'client-sdk', 'package.json', 'tsconfig.json']) {
      cpSync(join(ROOT, entry), join(copy, entry), {
        recursive: true,
        filter: (src) => !src.includes('node_modules'),
      });
    }
    symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'), 'dir');
  });

  after(() => {
    if (copy) rmSync(copy, { recursive: true, force: true });
  });

  it('generates a module that type-checks and passes the kit tests, and leaves this tree alone', async () => {
    const node = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
      run(process.execPath, args, { cwd: copy, env, maxBuffer: 16 * 1024 * 1024 });
    const made = await node(['--import', 'tsx', 'server/kit/new-module.ts', NAME]);
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
