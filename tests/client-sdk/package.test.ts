// Test tier: process
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { build } from 'esbuild';
import { createClient } from '@cloud-platform/client';
import { createOrg } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { runNode, type CliRun } from './support/run-cli.js';

const ROOT = resolve(import.meta.dirname, '../..');
const SDK = join(ROOT, 'client-sdk');
const CONSUMER = join(import.meta.dirname, 'consumer');
const rootPackage = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  devDependencies: Record<string, string>;
};

/** npm, as the user runs it (the one that runs this suite when it was started by `npm test`). */
function npm(args: string[], cwd: string): Promise<CliRun> {
  const env = {
    ...process.env,
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
  };
  const execPath = process.env.npm_execpath;
  return execPath && /\.c?js$/.test(execPath)
    ? runNode([execPath, ...args], { cwd, env })
    : runNode(args, { cwd, env, command: 'npm' });
}

function ok(run: CliRun, what: string): CliRun {
  expect(run.code, `${what}:\n${run.stdout}\n${run.stderr}`).to.equal(0);
  return run;
}

/**
 * The published package, as a user gets it: `npm pack` in client-sdk/ (its prepack builds dist/), the tarball
 * installed into an empty project outside the repository, a strict TypeScript program type-checked against it and
 * run against a live server, the `cloud` bin run from it, and the SDK bundled for a browser.
 */
describe('client SDK package (packed, installed outside the repository)', function () {
  this.timeout(240_000);
  let s: TestServer;
  let project: string;

  before(async () => {
    s = await sharedServer();
    project = mkdtempSync(join(tmpdir(), 'sdk-consumer-'));
    const packed = ok(await npm(['pack', '--json', '--pack-destination', project], SDK), 'npm pack');
    const [{ filename }] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as [
      { filename: string },
    ];
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'sdk-consumer', private: true, type: 'module' }, null, 2),
    );
    for (const file of ['consumer.ts', 'tsconfig.json', 'browser.js']) {
      copyFileSync(join(CONSUMER, file), join(project, file));
    }
    ok(
      await npm(
        [
          'install',
          '--prefer-offline',
          '--no-package-lock',
          '--loglevel=error',
          `./${filename}`,
          `typescript@${rootPackage.devDependencies.typescript}`,
          `@types/node@${rootPackage.devDependencies['@types/node']}`,
        ],
        project,
      ),
      'npm install',
    );
  });

  after(() => {
    if (project) rmSync(project, { recursive: true, force: true });
  });

  it('holds built JavaScript and one self-contained declaration file, and installs no server package', () => {
    const installed = join(project, 'node_modules/@cloud-platform/client');
    const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Record<string, any>;
    expect(pkg.private).to.equal(undefined);
    expect(pkg.exports['.']).to.include({ types: './dist/index.d.ts', import: './dist/index.js' });
    for (const version of Object.values(pkg.dependencies as Record<string, string>)) {
      expect(version).to.match(/^\d+\.\d+\.\d+$/);
    }
    expect(existsSync(join(installed, 'src'))).to.equal(false);
    const dts = readFileSync(join(installed, 'dist/index.d.ts'), 'utf8');
    const typeImports = [...dts.matchAll(/from '([^']+)'|import\("([^"]+)"\)/g)].map((m) => m[1] ?? m[2]);
    expect([...new Set(typeImports)].sort()).to.deep.equal(['@trpc/client', '@trpc/server']);
    // The router's procedures are spelled out in the file itself.
    expect(dts).to.match(/declare const appRouter: _trpc_server\.TRPCBuiltRouter</);
    expect(dts).to.contain('two_factor_required: true;');
    const js = readFileSync(join(installed, 'dist/index.js'), 'utf8');
    const jsImports = [
      ...js.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']/gm),
    ].map((m) => m[1] ?? m[2]);
    expect([...new Set(jsImports)]).to.deep.equal(['@trpc/client']);
    for (const serverOnly of ['fastify', '@mikro-orm/core', 'zod', 'pg', 'cloud-platform-api']) {
      expect(existsSync(join(project, 'node_modules', serverOnly)), serverOnly).to.equal(false);
    }
  });

  it('type-checks a strict consumer (misuse fails to compile) that then runs against a live server', async () => {
    // A misuse line that compiled would leave its `@ts-expect-error` unused, which is itself an error; the
    // declaration file is checked too (`skipLibCheck: false`).
    const tsc = ok(
      await runNode([join(project, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], {
        cwd: project,
        env: process.env,
      }),
      'tsc',
    );
    expect(tsc.stdout).to.equal('');

    const owner = await createOrg(s.deps);
    const run = ok(
      await runNode(['build/consumer.js', s.baseUrl, owner.email, owner.password], {
        cwd: project,
        env: process.env,
      }),
      'consumer',
    );
    const out = JSON.parse(run.stdout) as Record<string, any>;
    expect(out).to.deep.include({ tokenType: 'Bearer', role: 'owner', email: owner.email });
    expect(out.connection).to.include({ status: 'connecting', wgQuick: true });
    expect(out.build.status).to.equal('success');
    expect(out.build.last).to.match(/^Deployment ready at https:\/\//);
    expect(out.notFound).to.include({ code: 'NOT_FOUND', status: 404 });
    expect(out.notFound.requestId).to.match(/^req_/);
  });

  it('runs its `cloud` bin', async () => {
    const owner = await createOrg(s.deps);
    const { secret } = await createClient({ baseUrl: s.baseUrl, token: owner.token }).apiKeys.create.mutate({
      name: 'packed bin',
      permissions: ['vpn:read'],
    });
    const env = {
      ...process.env,
      CLOUD_API_URL: s.baseUrl,
      CLOUD_API_KEY: secret,
      XDG_CONFIG_HOME: project,
    };
    const version = ok(
      await runNode([join(project, 'node_modules/.bin/cloud'), '--version'], { cwd: project, env }),
      'cloud --version',
    );
    expect(version.stdout.trim()).to.equal(
      JSON.parse(readFileSync(join(SDK, 'package.json'), 'utf8')).version,
    );
    const listed = ok(
      await runNode([join(project, 'node_modules/.bin/cloud'), 'vpn', 'list', '--json'], {
        cwd: project,
        env,
      }),
      'cloud vpn list',
    );
    expect(JSON.parse(listed.stdout).connections).to.deep.equal([]);
    const me = await runNode([join(project, 'node_modules/.bin/cloud'), 'whoami'], { cwd: project, env });
    expect(me.code).to.equal(3);
    expect(me.stderr).to.match(/^error: This operation cannot be called with an API key: .+ \[FORBIDDEN, /);
    expect(me.stderr).to.match(/\nhint: the API key in CLOUD_API_KEY cannot do this/);
  });

  it('bundles for a browser (fetch only, no Node built-in)', async () => {
    const result = await build({
      absWorkingDir: project,
      entryPoints: ['browser.js'],
      bundle: true,
      platform: 'browser',
      format: 'esm',
      write: false,
      logLevel: 'silent',
    });
    expect(result.errors).to.deep.equal([]);
    expect(result.outputFiles[0]!.text).to.contain('createClient');
  });
});
