import { readdirSync, readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import ts from 'typescript';

/**
 * The layers of docs/adding-a-module.md, held by a test: each file imports only from its own layer or the ones
 * below it (type-only imports included: a type is a dependency too).
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SERVER = resolve(ROOT, 'server');

const LAYERS = ['lib', 'db', 'jobs/events', 'access', 'kit', 'trpc', 'modules', 'router', 'app'] as const;
type Layer = (typeof LAYERS)[number];

/** The layer of a file under server/. */
export function layerOf(file: string): Layer {
  const rel = relative(SERVER, file).replaceAll('\\', '/');
  const top = rel.split('/')[0]!;
  if (top === 'lib' || rel === 'config.ts') return 'lib';
  if (top === 'db') return 'db';
  if (top === 'jobs' || top === 'events' || top === 'mail') return 'jobs/events';
  if (top === 'access') return 'access';
  if (top === 'kit') return 'kit';
  if (top === 'trpc') return 'trpc';
  if (top === 'modules') return 'modules';
  if (rel === 'router.ts' || rel === 'modules.ts') return 'router';
  return 'app';
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = resolve(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** Every relative module specifier a file imports or re-exports, resolved to a file path. */
export function importsOf(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2023, true);
  const out: string[] = [];
  const visit = (node: ts.Node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier) {
      out.push((node.moduleSpecifier as ts.StringLiteral).text);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      ts.isStringLiteral(node.arguments[0]!)
    ) {
      out.push(node.arguments[0].text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      out.push((node.argument.literal as ts.StringLiteral).text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out.filter((s) => s.startsWith('.')).map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')));
}

/**
 * The one import up the layers: the type of `deps.modules` (kit/deps.ts) is derived from the list of modules
 * (server/modules.ts), type only, so that adding a module adds its key. Held to `import type` below.
 */
const TYPE_OF_MODULES = { from: 'kit/deps.ts', to: 'modules.ts' };

const moduleOf = (file: string) => relative(resolve(SERVER, 'modules'), file).split('/')[0]!;

/** The rule breaks of one import, as sentences; empty when it is allowed. */
export function violations(from: string, to: string): string[] {
  const out: string[] = [];
  const a = layerOf(from);
  const b = layerOf(to);
  const exception =
    relative(SERVER, from) === TYPE_OF_MODULES.from && relative(SERVER, to) === TYPE_OF_MODULES.to;
  if (LAYERS.indexOf(b) > LAYERS.indexOf(a) && !exception)
    out.push(`the ${a} layer imports the ${b} layer above it`);
  if (a === 'modules' && b === 'modules' && moduleOf(from) !== moduleOf(to)) {
    out.push(`module ${moduleOf(from)} imports module ${moduleOf(to)} (share through a lower layer instead)`);
  }
  // Only a module's router wires it to tRPC: services, jobs and the rest take a narrow context (server/kit/deps.ts).
  if (a === 'modules' && b === 'trpc' && !from.endsWith('.router.ts')) {
    out.push('a module file other than its router imports server/trpc/');
  }
  return out;
}

describe('layers (docs/adding-a-module.md)', () => {
  const files = sourceFiles(SERVER);

  it('every import of server/ goes down the layers, modules stay apart, only routers know tRPC', () => {
    const broken: string[] = [];
    for (const file of files) {
      for (const target of importsOf(file)) {
        for (const v of violations(file, target)) {
          broken.push(`${relative(ROOT, file)} → ${relative(ROOT, target)}: ${v}`);
        }
      }
    }
    expect(broken, broken.join('\n')).to.deep.equal([]);
  });

  it('kit/deps.ts takes only the type of the modules list from server/modules.ts', () => {
    const source = readFileSync(resolve(SERVER, TYPE_OF_MODULES.from), 'utf8');
    const imports = source.split('\n').filter((line) => /from '\.\.\/modules\.js'/.test(line));
    expect(imports).to.deep.equal([`import type { ModuleRuntimes } from '../modules.js';`]);
  });

  it('the rule itself: an upward import, a module importing another, a service importing tRPC are refused', () => {
    const at = (p: string) => resolve(SERVER, p);
    expect(violations(at('lib/pagination.ts'), at('db/orm.ts'))).to.have.length(1);
    expect(
      violations(at('modules/users/users.service.ts'), at('modules/auth/auth.service.ts')),
    ).to.have.length(1);
    expect(violations(at('modules/vpn/vpn.service.ts'), at('trpc/context.ts'))).to.have.length(1);
    expect(violations(at('modules/vpn/vpn.router.ts'), at('trpc/procedures.ts'))).to.deep.equal([]);
    expect(violations(at('app.ts'), at('router.ts'))).to.deep.equal([]);
  });

  it('the client SDK imports nothing of server/ but types', () => {
    const sdk = sourceFiles(resolve(ROOT, 'client-sdk/src'));
    const runtime: string[] = [];
    for (const file of sdk) {
      const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2023, true);
      for (const stmt of source.statements) {
        if (!ts.isImportDeclaration(stmt) && !ts.isExportDeclaration(stmt)) continue;
        const spec = (stmt.moduleSpecifier as ts.StringLiteral | undefined)?.text ?? '';
        const typeOnly = /^(import|export)\s+type\b/.test(stmt.getText(source));
        if (spec.includes('/server/') && !typeOnly) runtime.push(`${relative(ROOT, file)} → ${spec}`);
      }
    }
    expect(runtime).to.deep.equal([]);
  });
});

describe('no import cycles in the auth module', () => {
  // The password and two-factor services share the end of a sign-in through login-completion.ts, not each other.
  it('no file of server/modules/auth imports, directly or through others, a file that imports it', () => {
    const AUTH = resolve(SERVER, 'modules/auth');
    const files = sourceFiles(AUTH);
    const graph = new Map(files.map((f) => [f, importsOf(f).filter((t) => t.startsWith(AUTH))]));
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const stack: string[] = [];
    const visit = (file: string) => {
      state.set(file, 'open');
      stack.push(file);
      for (const next of graph.get(file) ?? []) {
        if (state.get(next) === 'open') {
          const cycle = [...stack.slice(stack.indexOf(next)), next].map((f) => relative(ROOT, f));
          cycles.push(cycle.join(' → '));
        } else if (!state.has(next)) visit(next);
      }
      stack.pop();
      state.set(file, 'done');
    };
    for (const file of files) if (!state.has(file)) visit(file);
    expect(cycles, cycles.join('\n')).to.deep.equal([]);
  });
});
