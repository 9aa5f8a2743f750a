// Test tier: unit
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { buildOpenApiDocument } from '../../server/openapi.js';
import { listGuides } from '../../server/guides.js';
import { anchors, links, markdownFiles, read, ROOT, slug } from './markdown.js';

/** The tracked source files whose comments may cite a guide: code, tests, scripts, the CI script. */
function sourceFiles(): string[] {
  return execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((f) => /\.(ts|cjs|mjs|js|sh)$/.test(f) || f === '.ci/run')
    .filter((f) => !/(^|\/)(node_modules|dist)\//.test(f) && existsSync(join(ROOT, f)));
}

interface Citation {
  file: string;
  line: number;
  target: string;
  section: string | undefined;
}

/**
 * The guides a source file cites: a guide of docs/, the README (in client-sdk/, the SDK's README) or the SDK's README
 * by its path, then, after a comma, the section's heading in double quotes; or the file alone. A citation may run
 * onto the next comment line.
 */
function citations(file: string, text: string): Citation[] {
  const out: Citation[] = [];
  const lines = text.split('\n');
  const cite = /(?<![\w/.-])(docs\/[a-z0-9-]+\.md|(?:client-sdk\/)?README(?:\.md)?)\b(?:,? "([^"]+)")?/g;
  lines.forEach((l, i) => {
    const next = (lines[i + 1] ?? '').replace(/^\s*(?:\*|\/\/|#)?\s*/, '');
    for (const m of `${l} ${next}`.matchAll(cite)) {
      if (m.index >= l.length) break;
      const readme = file.startsWith('client-sdk/') ? 'client-sdk/README.md' : 'README.md';
      const target = m[1]!.includes('/') ? m[1]! : readme;
      out.push({ file, line: i + 1, target, section: m[2]?.replace(/\s+/g, ' ') });
    }
  });
  return out;
}

/**
 * The README, the guides in docs/ and the SDK's README link to one another (README, "Guides"): every relative link
 * must reach a file of the repository and every #anchor a heading of its target, as GitHub renders them. No network:
 * links to other sites are not followed. The code, tests and scripts cite them in their comments (a guide and the
 * heading of a section): every cited file and heading must exist.
 */
describe('Documentation links', () => {
  it('computes anchors as GitHub does', () => {
    expect(slug('Jobs and crash recovery')).to.equal('jobs-and-crash-recovery');
    expect(slug('The first owner (`OWNER_*`)')).to.equal('the-first-owner-owner_');
    expect(slug('Browsers (CORS)')).to.equal('browsers-cors');
    expect(slug('Redeliver, recover, rotate')).to.equal('redeliver-recover-rotate');
    expect(slug('Protocol (`/v1/agent/*`)')).to.equal('protocol-v1agent');
    expect(slug('A real site from a local repository, in a few commands')).to.equal(
      'a-real-site-from-a-local-repository-in-a-few-commands',
    );
    expect([...anchors('# A\n## Lists\n```\n## not a heading\n```\n## Lists\n')]).to.deep.equal([
      'a',
      'lists',
      'lists-1',
    ]);
  });

  for (const file of markdownFiles()) {
    it(`${file}: every relative link and anchor resolves`, () => {
      const problems: string[] = [];
      const text = read(file);
      for (const link of links(file, text)) {
        const { target } = link;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:: another site
        const [path, anchor] = target.split('#', 2) as [string, string | undefined];
        const where = `${file}:${link.line} → ${target}`;
        let targetFile = file;
        if (path !== '') {
          if (path.startsWith('/')) {
            problems.push(`${where}: an absolute path does not resolve on GitHub; use a relative one`);
            continue;
          }
          targetFile = normalize(join(dirname(file), decodeURIComponent(path)));
          if (targetFile.startsWith('..') || !existsSync(join(ROOT, targetFile))) {
            problems.push(`${where}: no such file`);
            continue;
          }
        }
        if (anchor === undefined) continue;
        if (!targetFile.endsWith('.md') || statSync(join(ROOT, targetFile)).isDirectory()) {
          problems.push(`${where}: an anchor on a file that is not Markdown`);
          continue;
        }
        if (!anchors(read(targetFile)).has(decodeURIComponent(anchor))) {
          problems.push(`${where}: no heading with the anchor #${anchor} in ${targetFile}`);
        }
      }
      expect(problems, problems.join('\n')).to.deep.equal([]);
    });
  }

  it('reads the citations of guides in source files', () => {
    const text = [
      '// As docs/jobs.md, "Jobs" says, and docs/operating.md',
      ' * (docs/databases.md,',
      ' * "Capacity of a server"); README, "Guides".',
    ].join('\n');
    expect(citations('server/x.ts', text)).to.deep.equal([
      { file: 'server/x.ts', line: 1, target: 'docs/jobs.md', section: 'Jobs' },
      { file: 'server/x.ts', line: 1, target: 'docs/operating.md', section: undefined },
      { file: 'server/x.ts', line: 2, target: 'docs/databases.md', section: 'Capacity of a server' },
      { file: 'server/x.ts', line: 3, target: 'README.md', section: 'Guides' },
    ]);
    expect(citations('client-sdk/src/x.ts', '// README, "Guides"')[0]!.target).to.equal(
      'client-sdk/README.md',
    );
  });

  it('every guide and section a source file cites exists', () => {
    const problems: string[] = [];
    let count = 0;
    for (const file of sourceFiles()) {
      for (const c of citations(file, read(file))) {
        count++;
        const where = `${c.file}:${c.line} → ${c.target}${c.section === undefined ? '' : `, "${c.section}"`}`;
        if (!existsSync(join(ROOT, c.target))) problems.push(`${where}: no such file`);
        else if (c.section !== undefined && !anchors(read(c.target)).has(slug(c.section))) {
          problems.push(`${where}: no such heading in ${c.target}`);
        }
      }
    }
    expect(count, 'citations found').to.be.above(100);
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });

  it('the README links to every guide of docs/', () => {
    const readme = links('README.md', read('README.md')).map((l) => l.target.split('#')[0]);
    const missing = markdownFiles()
      .filter((f) => f.startsWith('docs/'))
      .filter((f) => !readme.includes(f));
    expect(missing, 'guides the README does not link to').to.deep.equal([]);
  });

  it('the README stays short (at most 250 lines)', () => {
    expect(read('README.md').split('\n').length).to.be.at.most(251);
  });

  it('the reference page (/docs) lists every guide in the OpenAPI description', () => {
    const guides = listGuides();
    const files = markdownFiles()
      .filter((f) => f.startsWith('docs/'))
      .map((f) => f.slice('docs/'.length));
    expect(guides.map((g) => g.file).sort()).to.deep.equal([...files].sort());
    const description =
      buildOpenApiDocument({ publicBaseUrl: 'https://api.example.com' }).info.description ?? '';
    for (const g of guides) {
      expect(description, g.file).to.include(`](https://api.example.com/docs/guides/${g.file})`);
    }
  });
});
