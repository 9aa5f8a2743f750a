// Test tier: unit
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { fencedBlocks, read, ROOT } from './markdown.js';

/**
 * Code the guides show as taken from the project's files: a ```ts block whose first line is a comment naming the file
 * (`// server/modules/vpn/vpn.service.ts`). The rest of the block must be in that file, compared line by line without
 * leading indentation or blank lines; a line `// …` leaves out what lies between, and the parts keep their order.
 */
const GUIDES = ['docs/adding-a-module.md'];

const SOURCE = /^\/\/ ((?:server|shared|vpn-agent|client-sdk|tests)\/\S+\.ts)$/;
const ELISION = '// …';

/** The lines as compared: without leading and trailing spaces, blank lines left out. */
function significant(text: string): string[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
}

/** Where the excerpt departs from the file, as a sentence; null when every part is in it, in order. */
export function excerptMismatch(excerpt: string, file: string): string | null {
  const lines = significant(file);
  const parts: string[][] = [[]];
  for (const line of significant(excerpt)) {
    if (line === ELISION) parts.push([]);
    else parts.at(-1)!.push(line);
  }
  let from = 0;
  for (const part of parts.filter((p) => p.length > 0)) {
    let at = -1;
    for (let i = from; i + part.length <= lines.length && at === -1; i++) {
      if (part.every((l, k) => lines[i + k] === l)) at = i;
    }
    if (at === -1) return `not in the file (after what matched before): ${part.join(' ⏎ ')}`;
    from = at + part.length;
  }
  return null;
}

/** The ```ts blocks of a guide that name their file, with the line of their fence. */
function excerpts(guide: string): { line: number; source: string; body: string }[] {
  return fencedBlocks(read(guide), 'ts').flatMap(({ line, body }) => {
    const [first = '', ...rest] = body.split('\n');
    const source = SOURCE.exec(first.trim())?.[1];
    return source ? [{ line, source, body: rest.join('\n') }] : [];
  });
}

describe('guides: code taken from a file is still in that file', () => {
  for (const guide of GUIDES) {
    it(`${guide}: each excerpt matches the file it names`, () => {
      const found = excerpts(guide);
      expect(found, 'the guide shows the module shape from the vpn module').to.have.length.of.at.least(5);
      const wrong: string[] = [];
      for (const { line, source, body } of found) {
        const path = join(ROOT, source);
        if (!existsSync(path)) {
          wrong.push(`${guide}:${line}: ${source} does not exist`);
          continue;
        }
        const mismatch = excerptMismatch(body, readFileSync(path, 'utf8'));
        if (mismatch) wrong.push(`${guide}:${line}: ${source}: ${mismatch}`);
      }
      expect(wrong).to.deep.equal([]);
    });
  }

  it('the comparison itself: indentation and blank lines aside, parts in order, `// …` between them', () => {
    const file = 'function a() {\n  return 1;\n}\n\nfunction b() {\n  return 2;\n}\n';
    expect(excerptMismatch('function a() {\nreturn 1;\n}', file)).to.equal(null);
    expect(excerptMismatch('function a() {\n  // …\n}\n// …\nfunction b() {', file)).to.equal(null);
    expect(excerptMismatch('function a() {\nreturn 2;', file)).to.match(/not in the file/);
    expect(excerptMismatch('function b() {\n// …\nfunction a() {', file)).to.match(/not in the file/);
  });
});
