import { invalidInput, type AppError, type ErrorDetail } from './errors.js';

/** Input (a JSON body, `/trpc` input, query and path values) nested deeper than this is refused with 400. */
export const MAX_INPUT_DEPTH = 32;

/** At most this many problems are listed in `details`. */
const MAX_DETAILS = 20;

/** NUL, or a UTF-16 surrogate that is not half of a pair (with the `u` flag a pair is one code point). */
const UNSTORABLE = /[\0\p{Cs}]/u;

const NUL_MESSAGE = 'Text must not contain NUL characters (U+0000)';
const SURROGATE_MESSAGE = 'Text must be valid Unicode (it contains a lone UTF-16 surrogate)';
const DEPTH_MESSAGE = `Input must not be nested more than ${MAX_INPUT_DEPTH} levels deep`;

function stringProblem(s: string): string | undefined {
  if (!UNSTORABLE.test(s)) return undefined;
  return s.includes('\0') ? NUL_MESSAGE : SURROGATE_MESSAGE;
}

/** A field name as written in `details.path`: the characters that made it unstorable shown as U+FFFD. */
function printable(key: string): string {
  return key.replace(/[\0\p{Cs}]/gu, '\uFFFD');
}

function isPlainContainer(value: object): boolean {
  if (Array.isArray(value)) return true;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * Finds input that no procedure may receive, whatever its schema: text the database cannot store (PostgreSQL's
 * `text` and `jsonb` refuse NUL; a lone surrogate is not Unicode and would be stored as U+FFFD), in values and in
 * field names, and nesting deeper than {@link MAX_INPUT_DEPTH} levels (which would exhaust the stack of the code
 * that walks it). Returns the 400 `VALIDATION_ERROR` to answer with, naming each field's path, or undefined.
 *
 * Walks only what JSON and query strings produce (plain objects, arrays, strings), which is a tree: the walk is
 * linear in the input's size and never goes deeper than the limit, however deep the input is.
 */
export function checkInput(input: unknown): AppError | undefined {
  if (input === null || input === undefined) return undefined;
  if (typeof input === 'string') {
    const problem = stringProblem(input);
    return problem ? invalid([{ path: '', message: problem }]) : undefined;
  }
  if (typeof input !== 'object') return undefined;
  const details: ErrorDetail[] = [];
  walk(input, [], 1, details);
  return details.length > 0 ? invalid(details) : undefined;
}

function walk(node: object, path: string[], depth: number, details: ErrorDetail[]): void {
  if (!isPlainContainer(node)) return;
  if (depth > MAX_INPUT_DEPTH) {
    details.push({ path: path.join('.'), message: DEPTH_MESSAGE });
    return;
  }
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length && details.length < MAX_DETAILS; i++) {
      visit(node[i] as unknown, String(i), path, depth, details);
    }
    return;
  }
  const record = node as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (details.length >= MAX_DETAILS) return;
    const problem = stringProblem(key);
    if (problem)
      details.push({ path: [...path, printable(key)].join('.'), message: `Field name: ${problem}` });
    else visit(record[key], key, path, depth, details);
  }
}

function visit(value: unknown, key: string, path: string[], depth: number, details: ErrorDetail[]): void {
  if (typeof value === 'string') {
    const problem = stringProblem(value);
    if (problem) details.push({ path: [...path, key].join('.'), message: problem });
  } else if (value !== null && typeof value === 'object') {
    path.push(key);
    walk(value, path, depth + 1, details);
    path.pop();
  }
}

function invalid(details: ErrorDetail[]): AppError {
  return invalidInput(details as { path: string; message: string }[]);
}
