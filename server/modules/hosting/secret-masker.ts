/**
 * Masking of the site's variable values in a build's log (docs/security.md, "Build logs"). What it catches: each
 * value (at least 4 characters; shorter ones would mask ordinary words) as it is, each line of a multi-line value,
 * its hexadecimal form (lower and upper case) and its base64 forms (standard and URL-safe, at each of the three
 * alignments it can have inside a longer encoded text), each of these also when line breaks split it within the
 * text masked at once (one chunk of output: build-process.ts masks every complete line of a chunk together).
 * Anything else (another encoding, a value printed a piece at a time across chunks, reversed, compressed…) is not
 * caught: docs/security.md says so.
 */

const MIN_LENGTH = 4;
/** Encoded forms shorter than this are not masked: they would match ordinary text. */
const MIN_ENCODED_LENGTH = 6;

const MASK = '****';

/**
 * The base64 texts that appear wherever `bytes` are encoded inside longer data: for each of the 3 offsets the value
 * can start at (mod 3), the characters that depend on its bytes only (those shared with the data around it vary).
 */
export function base64Fragments(bytes: Buffer): string[] {
  const out: string[] = [];
  for (let offset = 0; offset < 3; offset += 1) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    const first = Math.ceil((offset * 4) / 3);
    const last = Math.floor(((offset + bytes.length) * 4) / 3);
    if (last > first) out.push(encoded.slice(first, last));
  }
  return out;
}

/** Every form of `value` that is masked (before line breaks are allowed between its characters). */
export function maskedForms(value: string): string[] {
  const forms = new Set<string>();
  // Line breaks inside a value are matched by the pattern (any line break may appear between two characters).
  const flat = value.replace(/[\r\n]+/g, '');
  if (flat.length >= MIN_LENGTH) forms.add(flat);
  for (const line of value.split(/\r?\n/)) if (line.length >= MIN_LENGTH) forms.add(line);
  if (flat.length < MIN_LENGTH) return [...forms];
  // The encodings of the value as it was given, and of the value without its line breaks.
  for (const v of new Set([value, flat])) {
    const bytes = Buffer.from(v, 'utf8');
    const hex = bytes.toString('hex');
    for (const f of [hex, hex.toUpperCase()]) forms.add(f);
    for (const f of base64Fragments(bytes)) {
      if (f.length < MIN_ENCODED_LENGTH) continue;
      forms.add(f);
      forms.add(f.replace(/\+/g, '-').replace(/\//g, '_'));
    }
  }
  return [...forms];
}

/** Forms are looked up by their first characters (every form has at least this many). */
const KEY_LENGTH = MIN_LENGTH;

/**
 * A function replacing, in a text of one or more lines, every masked form of the values of `secrets` by `****`
 * (one `****` per line the match spans, so the text keeps its lines), longest first so that a value containing
 * another is masked whole.
 *
 * Line breaks may stand anywhere in a match: the text is searched with its line breaks taken out, and each match
 * mapped back. The search looks each position's first {@link KEY_LENGTH} characters up in a table of the forms (a
 * regular expression with one alternative per form, line breaks allowed between characters, took seconds per
 * megabyte with a few dozen values).
 */
export function secretMasker(secrets: readonly string[]): (s: string) => string {
  const byKey = new Map<string, string[]>();
  for (const form of new Set(secrets.flatMap(maskedForms))) {
    const key = form.slice(0, KEY_LENGTH);
    const list = byKey.get(key) ?? [];
    list.push(form);
    byKey.set(key, list);
  }
  if (byKey.size === 0) return (s) => s;
  // The first two characters of each form, as one number: most positions go no further.
  const heads = new Set([...byKey.keys()].map((k) => k.charCodeAt(0) * 65536 + k.charCodeAt(1)));
  for (const list of byKey.values()) list.sort((a, b) => b.length - a.length);
  return (text) => {
    const hasBreaks = /[\r\n]/.test(text);
    let flat = text;
    let origin: Int32Array | undefined;
    if (hasBreaks) {
      origin = new Int32Array(text.length);
      let n = 0;
      let out = '';
      let from = 0;
      for (let i = 0; i < text.length; i += 1) {
        const c = text.charCodeAt(i);
        if (c === 10 || c === 13) {
          out += text.slice(from, i);
          from = i + 1;
        } else {
          origin[n] = i;
          n += 1;
        }
      }
      flat = out + text.slice(from);
    }
    // Matches as [start, end) in `text`.
    const matches: number[] = [];
    const last = flat.length - KEY_LENGTH;
    for (let i = 0; i <= last; i += 1) {
      if (!heads.has(flat.charCodeAt(i) * 65536 + flat.charCodeAt(i + 1))) continue;
      const list = byKey.get(flat.slice(i, i + KEY_LENGTH));
      if (!list) continue;
      const form = list.find((f) => flat.startsWith(f, i));
      if (!form) continue;
      const end = i + form.length;
      matches.push(origin ? origin[i]! : i, origin ? origin[end - 1]! + 1 : end);
      i = end - 1;
    }
    if (matches.length === 0) return text;
    let result = '';
    let at = 0;
    for (let m = 0; m < matches.length; m += 2) {
      const start = matches[m]!;
      const end = matches[m + 1]!;
      result += text.slice(at, start) + text.slice(start, end).replace(/[^\r\n]+/g, MASK);
      at = end;
    }
    return result + text.slice(at);
  };
}
