/**
 * Builds the published package into dist/ (client-sdk/README.md, "Building and publishing"):
 *   dist/index.js   the SDK as one ES module (its only import: @trpc/client), for Node 18+ and browser bundlers;
 *   dist/index.d.ts one self-contained declaration file: the router's types are inlined from the server's emitted
 *                   declarations, with the server's context, meta and error data replaced by src/router-context.ts;
 *   dist/cli.js     the `cloud` command, which imports the SDK by its package name.
 * Run after `tsc -p tsconfig.build.json` has emitted the declarations (the `build` script does both).
 */
import { chmodSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { rollup } from 'rollup';
import { dts } from 'rollup-plugin-dts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const declarations = join(root, '.build/declarations');
const dist = join(root, 'dist');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const runtimeDependencies = Object.keys(pkg.dependencies ?? {});

rmSync(dist, { recursive: true, force: true });

// 1. The declaration bundle. The server's router.d.ts (emitted by tsc) spells every procedure's input and output
// out as plain object types; it refers to three server types only, which are replaced here. Any other server
// declaration reaching the bundle is an error: the package must not carry server types.
const serverDir = join(declarations, 'server') + sep;
const contextTypes = join(declarations, 'client-sdk/src/router-context.d.ts');
const keepServerTypesOut = {
  name: 'keep-server-types-out',
  resolveId(source, importer) {
    if (!importer?.startsWith(serverDir)) return null;
    if (/^\.\/trpc\/(context|init)\.js$/.test(source)) return contextTypes;
    if (!source.startsWith('.')) return null;
    throw new Error(
      `server declaration ${source} (from ${relative(declarations, importer)}) would enter the bundle`,
    );
  },
};
const bundle = await rollup({
  input: join(declarations, 'client-sdk/src/index.d.ts'),
  plugins: [keepServerTypesOut, dts({ respectExternal: false })],
  external: (id) => !id.startsWith('.') && !id.startsWith('/'),
  onwarn(warning) {
    throw new Error(`declaration bundle: ${warning.message}`);
  },
});
await bundle.write({ file: join(dist, 'index.d.ts'), format: 'es' });
await bundle.close();

const typeImports = [
  ...readFileSync(join(dist, 'index.d.ts'), 'utf8').matchAll(/from '([^']+)'|import\("([^"]+)"\)/g),
].map((m) => m[1] ?? m[2]);
const allowedTypeImports = new Set(['@trpc/client', '@trpc/server']);
const strayTypes = typeImports.filter((spec) => !allowedTypeImports.has(spec));
if (strayTypes.length > 0) throw new Error(`dist/index.d.ts imports ${[...new Set(strayTypes)].join(', ')}`);

// 2. The SDK: one ES module, fetch only (no Node built-in), dependencies left as imports.
await build({
  entryPoints: [join(root, 'src/index.ts')],
  outfile: join(dist, 'index.js'),
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  target: ['es2022', 'node18'],
  external: runtimeDependencies,
  legalComments: 'none',
  logLevel: 'warning',
});

// 3. The CLI: Node 20+, the SDK imported by the package's own name (so it runs dist/index.js).
await build({
  entryPoints: [join(root, 'src/cli/main.ts')],
  outfile: join(dist, 'cli.js'),
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: [pkg.name, ...runtimeDependencies],
  banner: { js: '#!/usr/bin/env node' },
  legalComments: 'none',
  logLevel: 'warning',
});
chmodSync(join(dist, 'cli.js'), 0o755);
