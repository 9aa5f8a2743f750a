// Test tier: unit
import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import ts from 'typescript';

const SDK_SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../client-sdk/src');

/** The modules a file imports at run time: type-only imports are erased exactly as the compiler erases them. */
function runtimeImports(file: string): string[] {
  const js = ts.transpileModule(readFileSync(file, 'utf8'), {
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2023,
      verbatimModuleSyntax: true,
    },
    fileName: file,
  }).outputText;
  const specifiers: string[] = [];
  const source = ts.createSourceFile(file.replace(/\.ts$/, '.js'), js, ts.ScriptTarget.ES2023);
  for (const stmt of source.statements) {
    if ((ts.isImportDeclaration(stmt) || ts.isExportDeclaration(stmt)) && stmt.moduleSpecifier) {
      specifiers.push((stmt.moduleSpecifier as ts.StringLiteral).text);
    }
  }
  return specifiers;
}

describe('client SDK runtime bundle', () => {
  it('contains no server code: its only run-time dependency is @trpc/client', () => {
    const seen = new Set<string>();
    const packages = new Set<string>();
    const queue = [resolve(SDK_SRC, 'index.ts')];
    while (queue.length > 0) {
      const file = queue.pop()!;
      if (seen.has(file)) continue;
      seen.add(file);
      for (const spec of runtimeImports(file)) {
        if (spec.startsWith('.')) queue.push(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
        else packages.add(spec);
      }
    }
    expect([...packages]).to.deep.equal(['@trpc/client']);
    for (const file of seen) expect(relative(SDK_SRC, file)).to.not.match(/^\.\./);
    expect(seen.size).to.be.greaterThan(1);
  });
});
