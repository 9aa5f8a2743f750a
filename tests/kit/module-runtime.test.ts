// Test tier: server
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import ts from 'typescript';
import { modules } from '../../server/modules.js';
import { sharedServer } from '../support/server.js';

/**
 * What a module keeps per process is built by its manifest's `create` and read as `deps.modules.<m>`
 * (docs/adding-a-module.md): no registry keyed by the process's deps, no worker looked up by name, and a driver's
 * interface knows nothing of its implementations (the module's `create` chooses one).
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SERVER = resolve(ROOT, 'server');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = resolve(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** A registry of per-process state keyed by the deps, and a lookup of a running worker by its name. */
const DEPS_WEAKMAP = /WeakMap<\s*AppDeps\b/;
const WORKER_LOOKUP = /\bworkerOf\s*[<(]/;

/** `file:line` of every line of server/ that matches. */
function linesMatching(pattern: RegExp): string[] {
  return sourceFiles(SERVER).flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .flatMap((line, i) => (pattern.test(line) ? [`${relative(ROOT, file)}:${i + 1}`] : [])),
  );
}

/** The files a source file imports (relative specifiers, resolved; type-only imports included). */
function importsOf(file: string): string[] {
  return ts
    .preProcessFile(readFileSync(file, 'utf8'), true, true)
    .importedFiles.map((f) => f.fileName)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
}

/** Imports of simulated implementations from driver interfaces (`x.driver.ts` → `simulated-*`). */
export function driverImportsOfSimulated(files: readonly string[]): string[] {
  return files
    .filter((f) => f.endsWith('.driver.ts') && !f.split('/').pop()!.startsWith('simulated-'))
    .flatMap((f) =>
      importsOf(f)
        .filter((target) => target.split('/').pop()!.startsWith('simulated-'))
        .map((target) => `${relative(ROOT, f)} → ${relative(ROOT, target)}`),
    );
}

describe('module runtimes (docs/adding-a-module.md)', () => {
  it('every module that declares `create` has its runtime in deps.modules, built at start', async () => {
    const s = await sharedServer();
    const declaring = modules.filter((m) => m.create).map((m) => m.name);
    // The type of deps.modules (ModuleRuntimes, server/kit/deps.ts) is checked against the same list (server/modules.ts).
    expect(Object.keys(s.deps.modules).sort()).to.deep.equal([...declaring].sort());
  });

  it('no state of a process is kept in a WeakMap keyed by its deps', () => {
    expect(linesMatching(DEPS_WEAKMAP)).to.deep.equal([]);
  });

  it('no worker is looked up by name (`workerOf`): services reach it through deps.modules', () => {
    expect(linesMatching(WORKER_LOOKUP)).to.deep.equal([]);
  });

  it('a driver interface imports none of its implementations', () => {
    expect(driverImportsOfSimulated(sourceFiles(SERVER))).to.deep.equal([]);
  });

  it('the rules themselves: a deps-keyed WeakMap, a worker lookup, an interface importing its simulation', () => {
    expect(DEPS_WEAKMAP.test('const drivers = new WeakMap<AppDeps, HostingDriver>();')).to.equal(true);
    expect(WORKER_LOOKUP.test('workerOf<DeliveryWorker>(deps, DELIVERY_WORKER)?.nudge();')).to.equal(true);
    expect(WORKER_LOOKUP.test('workerOf(deps, BILLING_SCHEDULER)')).to.equal(true);
    const dir = mkdtempSync(join(tmpdir(), 'driver-rule-'));
    try {
      const iface = join(dir, 'things.driver.ts');
      writeFileSync(iface, `import { SimulatedThings } from './simulated-things.driver.js';\n`);
      writeFileSync(
        join(dir, 'simulated-things.driver.ts'),
        `import type { X } from './things.driver.js';\n`,
      );
      expect(driverImportsOfSimulated([iface, join(dir, 'simulated-things.driver.ts')])).to.have.length(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
