import { fencedBlocks, proseLines } from './markdown.js';

/**
 * The curl commands of a guide's ```sh blocks, read as a shell would for the few forms the guides use
 * (`curl -s -X PUT $BASE/… -H '…' -d '{…}'`, a command continued with `\`, comments after `#`), so that a test can
 * send exactly what the guide shows.
 */

export interface CurlCommand {
  /** The line of the guide where the command starts. */
  line: number;
  method: string;
  /** The URL with the variables replaced. */
  url: string;
  headers: Record<string, string>;
  /** The `-d` body, as written (after the variables). */
  body: string | undefined;
}

/**
 * The text of a section: from its heading to the next heading of any level (fenced blocks included), after as many
 * empty lines as precede it, so that line numbers stay those of the file.
 */
export function section(text: string, heading: string): string {
  const lines = text.split('\n');
  const headings = new Set(
    proseLines(text)
      .filter((l) => /^#{1,6}\s/.test(l.text))
      .map((l) => l.line - 1),
  );
  const start = lines.findIndex((l, i) => headings.has(i) && l.replace(/^#+\s*/, '').trim() === heading);
  if (start === -1) throw new Error(`no heading "${heading}"`);
  let end = start + 1;
  while (end < lines.length && !headings.has(end)) end++;
  return '\n'.repeat(start) + lines.slice(start, end).join('\n');
}

/** The words of a shell line: quotes removed, `$NAME` replaced outside single quotes; a `#` word ends the line. */
export function shellWords(line: string, vars: Record<string, string>): string[] {
  const words: string[] = [];
  let word: string | null = null;
  const expand = (s: string) =>
    s.replace(/\$([A-Z_][A-Z0-9_]*)/g, (m, name: string) => {
      if (!(name in vars)) throw new Error(`unknown variable ${m} in: ${line}`);
      return vars[name]!;
    });
  let i = 0;
  while (i < line.length) {
    const c = line[i]!;
    if (c === ' ' || c === '\t') {
      if (word !== null) words.push(word);
      word = null;
      i++;
    } else if (c === '#' && word === null) {
      break;
    } else if (c === "'") {
      const close = line.indexOf("'", i + 1);
      if (close === -1) throw new Error(`unclosed quote in: ${line}`);
      word = (word ?? '') + line.slice(i + 1, close);
      i = close + 1;
    } else if (c === '"') {
      const close = line.indexOf('"', i + 1);
      if (close === -1) throw new Error(`unclosed quote in: ${line}`);
      word = (word ?? '') + expand(line.slice(i + 1, close));
      i = close + 1;
    } else {
      let j = i;
      while (j < line.length && !` \t'"`.includes(line[j]!)) j++;
      word = (word ?? '') + expand(line.slice(i, j));
      i = j;
    }
  }
  if (word !== null) words.push(word);
  return words;
}

/** One curl command's words as a request; throws on an option the guides do not use. */
export function parseCurl(words: string[], line: number): CurlCommand {
  if (words[0] !== 'curl') throw new Error(`not a curl command: ${words.join(' ')}`);
  let method: string | undefined;
  let url: string | undefined;
  let body: string | undefined;
  const headers: Record<string, string> = {};
  for (let i = 1; i < words.length; i++) {
    const w = words[i]!;
    if (w === '-s' || w === '-si' || w === '-i') continue;
    if (w === '-X') method = words[++i];
    else if (w === '-H') {
      const h = words[++i]!;
      const colon = h.indexOf(':');
      headers[h.slice(0, colon).trim().toLowerCase()] = h.slice(colon + 1).trim();
    } else if (w === '-d') body = words[++i];
    else if (w.startsWith('-')) throw new Error(`line ${line}: curl option ${w} is not read by this test`);
    else url = w;
  }
  if (url === undefined) throw new Error(`line ${line}: curl without a URL`);
  return { line, method: method ?? (body === undefined ? 'GET' : 'POST'), url, headers, body };
}

/** A curl command of a guide, as written (continued lines joined), with the line it starts on. */
export interface CurlText {
  line: number;
  text: string;
}

/** The curl commands of the ```sh blocks of `text`, in order. */
export function curlCommands(text: string): CurlText[] {
  const out: CurlText[] = [];
  for (const block of fencedBlocks(text, 'sh')) {
    const lines = block.body.split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (!/^\s*curl\s/.test(lines[i]!)) continue;
      const start = i;
      let command = lines[i]!.trim();
      while (command.endsWith('\\') && i + 1 < lines.length) {
        command = command.slice(0, -1) + ' ' + lines[++i]!.trim();
      }
      out.push({ line: block.line + 1 + start, text: command });
    }
  }
  return out;
}

/** A command as the request it sends, with the shell variables `vars` (`BASE`, `TOKEN`). */
export function curlRequest(command: CurlText, vars: Record<string, string>): CurlCommand {
  return parseCurl(shellWords(command.text, vars), command.line);
}
