import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Reading the repository's Markdown as GitHub renders it: headings and their anchors, links, fenced blocks. */

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** README.md, every docs/*.md and client-sdk/README.md, as paths relative to the repository. */
export function markdownFiles(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs, 'client-sdk/README.md'];
}

export function read(file: string): string {
  return readFileSync(join(ROOT, file), 'utf8');
}

/** The lines outside fenced code blocks, with their 1-based line numbers. */
export function proseLines(text: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let fence: string | null = null;
  text.split('\n').forEach((l, i) => {
    const m = /^\s*(`{3,}|~{3,})/.exec(l);
    if (m) {
      if (fence === null) fence = m[1]![0]!.repeat(m[1]!.length);
      else if (m[1]!.startsWith(fence)) fence = null;
      return;
    }
    if (fence === null) out.push({ line: i + 1, text: l });
  });
  return out;
}

/** The fenced blocks of a given language (```mermaid), with the line of their opening fence. */
export function fencedBlocks(text: string, lang: string): { line: number; body: string }[] {
  const out: { line: number; body: string }[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```' + lang) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i]!.trim() !== '```'; i++) body.push(lines[i]!);
    out.push({ line: start + 1, body: body.join('\n') });
  }
  return out;
}

/** The text GitHub shows for a heading's Markdown: code spans keep their content, links their text, no emphasis. */
function headingText(md: string): string {
  return md
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/(\*\*|__)(.+?)\1/g, '$2')
    .replace(/(^|\W)[*_](.+?)[*_](?=\W|$)/g, '$1$2')
    .replace(/<[^>]+>/g, '')
    .trim();
}

/** GitHub's anchor of a heading (the github-slugger rules): lower case, punctuation dropped, spaces to hyphens. */
export function slug(text: string): string {
  return headingText(text)
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a file's headings, with GitHub's `-1`, `-2` suffixes for repeated ones. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const { text: l } of proseLines(text)) {
    const m = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(l);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

export interface Link {
  file: string;
  line: number;
  target: string;
}

/** Inline links and images `[text](target)` of the prose (not in code spans or fenced blocks). */
export function links(file: string, text: string): Link[] {
  const out: Link[] = [];
  for (const { line, text: l } of proseLines(text)) {
    const prose = l.replace(/`[^`]*`/g, (s) => ' '.repeat(s.length));
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      out.push({ file, line, target: m[1]! });
    }
  }
  return out;
}

export const rel = (p: string) => relative(ROOT, p);
