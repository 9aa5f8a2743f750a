// Test tier: unit
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import ts from 'typescript';

/**
 * The layers of docs/adding-a-module.md, held by a test: each file imports only from its own layer or the ones
 * below it (type-only imports included: a type is a dependency too). Under them all, shared/: the few modules the
 * API and the VPN agent both use, which import neither (docs/architecture.md, "Project layout").
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SERVER = resolve(ROOT, 'server');
const SHARED = resolve(ROOT, 'shared');
const AGENT = resolve(ROOT, 'vpn-agent');

const LAYERS = [
  'shared',
  'lib',
  'db',
  'jobs/events',
  'limits',
  'access',
  'kit',
  'trpc',
  'modules',
  'router',
  'app',
] as const;
type Layer = (typeof LAYERS)[number];

/** True when `file` is `dir` or lies inside it. */
function isUnder(dir: string, file: string): boolean {
  const rel = relative(dir, file);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/** The layer of a file under server/ or shared/. */
export function layerOf(file: string): Layer {
  if (isUnder(SHARED, file)) return 'shared';
  const rel = relative(SERVER, file).replaceAll('\\', '/');
  const top = rel.split('/')[0]!;
  if (top === 'lib' || rel === 'config.ts') return 'lib';
  if (top === 'db') return 'db';
  if (top === 'jobs' || top === 'events' || top === 'mail') return 'jobs/events';
  if (top === 'limits') return 'limits';
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

/** Every relative module specifier a file (or `text` as that file) imports or re-exports, resolved to a file path. */
export function importsOf(file: string, text = readFileSync(file, 'utf8')): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2023, true);
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

const moduleOf = (file: string) => relative(resolve(SERVER, 'modules'), file).split('/')[0]!;

/** The rule breaks of one import, as sentences; empty when it is allowed. */
export function violations(from: string, to: string): string[] {
  const out: string[] = [];
  if (!isUnder(SERVER, to) && !isUnder(SHARED, to)) {
    return [`${relative(ROOT, from)} imports ${relative(ROOT, to)}, outside server/ and shared/`];
  }
  const a = layerOf(from);
  const b = layerOf(to);
  if (LAYERS.indexOf(b) > LAYERS.indexOf(a)) out.push(`the ${a} layer imports the ${b} layer above it`);
  if (a === 'modules' && b === 'modules' && moduleOf(from) !== moduleOf(to)) {
    out.push(`module ${moduleOf(from)} imports module ${moduleOf(to)} (share through a lower layer instead)`);
  }
  // Only a module's router wires it to tRPC: services, jobs and the rest take a narrow context (server/kit/deps.ts).
  if (a === 'modules' && b === 'trpc' && !from.endsWith('.router.ts')) {
    out.push('a module file other than its router imports server/trpc/');
  }
  return out;
}

/** A module's key in `deps.modules` (server/kit/deps.ts, `ModuleRuntimes`): its folder's name in camelCase. */
const runtimeKeyOf = (folder: string) => folder.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());

/**
 * Where a module's file reaches a runtime other than its own module's (`runtimeOf(deps, 'hosting')` in vpn/), or
 * reaches one around the kit's accessors (`deps.modules.vpn`), as sentences. Comments are not code.
 */
export function runtimeReachViolations(file: string, source: string): string[] {
  const own = runtimeKeyOf(moduleOf(file));
  const out: string[] = [];
  source.split('\n').forEach((line, i) => {
    if (/^\s*(\*|\/\/|\/\*)/.test(line)) return;
    const at = `${relative(ROOT, file)}:${i + 1}`;
    for (const m of line.matchAll(/\b(?:runtimeOf|repositoryOf)\([^,()]+, '(\w+)'\)/g)) {
      if (m[1] !== own) out.push(`${at}: module ${own} reaches the runtime of ${m[1]}`);
    }
    if (/\bdeps\.modules\b/.test(line))
      out.push(`${at}: deps.modules read directly (use runtimeOf/repositoryOf)`);
  });
  return out;
}

/** The rule breaks of an import of the VPN agent (it runs on hosts of its own): nothing of server/. */
export function agentViolations(to: string): string[] {
  return isUnder(SERVER, to) ? [`the VPN agent imports ${relative(ROOT, to)} of the API`] : [];
}

describe('layers (docs/adding-a-module.md)', () => {
  const files = [...sourceFiles(SERVER), ...sourceFiles(SHARED)];

  it('every import of server/ and shared/ goes down the layers, modules stay apart, only routers know tRPC', () => {
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

  it('a module reaches only its own runtime: runtimeOf/repositoryOf name its own key, never deps.modules', () => {
    const broken: string[] = [];
    for (const file of sourceFiles(resolve(SERVER, 'modules'))) {
      broken.push(...runtimeReachViolations(file, readFileSync(file, 'utf8')));
    }
    expect(broken, broken.join('\n')).to.deep.equal([]);
  });

  it("the runtime rule itself: another module's key and a direct deps.modules are refused, comments pass", () => {
    const file = resolve(SERVER, 'modules/api-keys/x.ts');
    expect(runtimeReachViolations(file, "const r = repositoryOf(ctx.deps, 'apiKeys');")).to.deep.equal([]);
    expect(runtimeReachViolations(file, "const r = runtimeOf(deps, 'vpn').peers;")).to.have.length(1);
    expect(runtimeReachViolations(file, 'const { peers } = deps.modules.vpn;')).to.have.length(1);
    expect(runtimeReachViolations(file, ' * `deps.modules.apiKeys` is built by create')).to.deep.equal([]);
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
    // Metering and rate limits sit under access (a user view counts API calls) and over the database.
    expect(violations(at('access/user.dto.ts'), at('limits/api-usage.ts'))).to.deep.equal([]);
    expect(violations(at('limits/api-usage.ts'), at('access/actor.ts'))).to.have.length(1);
    // shared/ sits under every layer of server/ and imports none of them, nor the VPN agent.
    const shared = resolve(SHARED, 'wireguard-keys.ts');
    expect(violations(at('modules/vpn/wireguard.ts'), shared)).to.deep.equal([]);
    expect(violations(at('lib/ids.ts'), shared)).to.deep.equal([]);
    expect(violations(shared, at('lib/ids.ts'))).to.have.length(1);
    expect(violations(shared, resolve(AGENT, 'agent.ts'))).to.have.length(1);
    expect(violations(at('modules/vpn/vpn.service.ts'), resolve(AGENT, 'agent.ts'))).to.have.length(1);
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

  it('the VPN agent imports nothing of server/, type-only imports included: it runs on hosts of its own', () => {
    const agent = sourceFiles(AGENT);
    expect(agent).to.not.be.empty;
    const broken: string[] = [];
    for (const file of agent) {
      for (const target of importsOf(file)) {
        for (const v of agentViolations(target)) broken.push(`${relative(ROOT, file)}: ${v}`);
      }
    }
    expect(broken, broken.join('\n')).to.deep.equal([]);
  });

  it('the rule itself: the agent importing server/, even a type, is refused; shared/ and its own files are not', () => {
    const file = resolve(AGENT, 'agent.ts');
    const text = [
      `import type { VpnServer } from '../server/modules/vpn/vpn-server.entity.js';`,
      `export type { Actor } from '../server/access/actor.js';`,
      `type Id = import('../server/lib/ids.js').Id;`,
      `const later = () => import('../server/modules/vpn/wireguard.js');`,
      `import { generateWireguardKeyPair } from '../shared/wireguard-keys.js';`,
      `import { WireguardHost } from './wireguard-host.js';`,
    ].join('\n');
    const targets = importsOf(file, text);
    expect(targets).to.have.length(6);
    expect(targets.map((t) => agentViolations(t).length)).to.deep.equal([1, 1, 1, 1, 0, 0]);
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
