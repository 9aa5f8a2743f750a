import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The guides of `docs/` (README, "Guides"), listed in the OpenAPI document's description and served as Markdown
 * under `/docs/guides/<file>` so that the reference page at `/docs` links to them. They are read from the
 * repository's `docs/` folder; a server installed without it lists and serves none.
 */
export interface Guide {
  /** The file name in `docs/`, such as `getting-started.md`. */
  file: string;
  /** The guide's first heading. */
  title: string;
}

/** The order a newcomer reads them in; a guide missing here comes after these, by file name. */
const ORDER = [
  'getting-started.md',
  'api-conventions.md',
  'configuration.md',
  'sdk-and-cli.md',
  'users-and-permissions.md',
  'accounts-and-sessions.md',
  'two-factor.md',
  'sso.md',
  'api-keys.md',
  'organization.md',
  'audit-log.md',
  'vpn.md',
  'vpn-servers.md',
  'sites.md',
  'hosting.md',
  'databases.md',
  'managed-databases.md',
  'billing.md',
  'webhooks.md',
  'architecture.md',
  'operating.md',
  'deploying.md',
  'security.md',
  'development.md',
  'adding-a-module.md',
  'benchmarks.md',
  'deviations-and-decisions.md',
];

/** The repository's `docs/` folder, above this file in the sources (`server/`) and in the build (`dist/server/`). */
export function findDocsDir(from = dirname(fileURLToPath(import.meta.url))): string | undefined {
  let dir = from;
  for (let i = 0; i < 4; i++) {
    const candidate = join(dir, 'docs');
    if (existsSync(join(candidate, 'getting-started.md'))) return candidate;
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return undefined;
}

export function listGuides(docsDir = findDocsDir()): Guide[] {
  if (!docsDir) return [];
  const rank = (file: string) => {
    const i = ORDER.indexOf(file);
    return i === -1 ? ORDER.length : i;
  };
  return readdirSync(docsDir)
    .filter((file) => /^[a-z0-9-]+\.md$/.test(file))
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))
    .map((file) => {
      const heading = /^# (.+)$/m.exec(readFileSync(join(docsDir, file), 'utf8'));
      return { file, title: heading ? heading[1]!.trim() : file };
    });
}

/** The "Guides" section of the OpenAPI description: one link per guide, absolute when the public address is known. */
export function guidesMarkdown(guides: Guide[], publicBaseUrl?: string): string {
  if (guides.length === 0) return '';
  const base = `${(publicBaseUrl ?? '').replace(/\/$/, '')}/docs/guides/`;
  return [
    '## Guides',
    'How each part of the platform works, beyond the operations listed here:',
    '',
    ...guides.map((g) => `- [${g.title.replace(/[[\]]/g, '')}](${base}${g.file})`),
  ].join('\n');
}
