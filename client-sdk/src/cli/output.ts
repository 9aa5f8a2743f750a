import { createInterface } from 'node:readline/promises';
import { Writable } from 'node:stream';

type Cell = string | number | boolean | null | undefined;

const text = (value: Cell): string =>
  value === null || value === undefined || value === '' ? '-' : String(value);

/** Columns aligned with spaces, a header in capitals; `(none)` for an empty list. */
export function table<T>(rows: readonly T[], columns: Record<string, (row: T) => Cell>): string {
  if (rows.length === 0) return '(none)';
  const headers = Object.keys(columns);
  const cells = rows.map((row) => headers.map((h) => text(columns[h]!(row))));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => (i === values.length - 1 ? v : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(headers.map((h) => h.toUpperCase())), ...cells.map(line)].join('\n');
}

/** `key: value` lines, keys aligned. */
export function fields(entries: Record<string, Cell>): string {
  const width = Math.max(...Object.keys(entries).map((k) => k.length));
  return Object.entries(entries)
    .map(([k, v]) => `${`${k}:`.padEnd(width + 1)} ${text(v)}`)
    .join('\n');
}

export const money = (dollars: number | null | undefined) =>
  dollars === null || dollars === undefined
    ? '-'
    : `${dollars < 0 ? '-' : ''}$${Math.abs(dollars).toFixed(2)}`;

/**
 * Terminal escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ST`, DCS/SOS/PM/APC strings, two-byte `ESC x`),
 * whole, so that no `[31m` is left behind.
 */
const ESCAPE_SEQUENCE =
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|[ -~])?/g;
/**
 * Control characters but line feed and tab (C0, DEL, C1: a carriage return or backspace can hide what was
 * printed before it), and the bidirectional overrides and isolates that reorder what is shown.
 */
// eslint-disable-next-line no-control-regex -- as above
const UNSAFE_CHARACTERS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text from the API (names, messages, build log lines: anyone in the organization may have typed them) made safe to
 * print: escape sequences and control characters removed. Every line the CLI prints goes through writeOut or
 * writeErr, which apply it.
 */
export function terminalSafe(text: string): string {
  return text.replace(ESCAPE_SEQUENCE, '').replace(UNSAFE_CHARACTERS, '');
}

/**
 * `--json` output: valid JSON with the same values, but C1 controls and bidirectional marks written as `\uXXXX`
 * escapes (JSON.stringify already escapes C0 controls, ESC included) so that printing it cannot drive a terminal.
 */
export function terminalSafeJson(json: string): string {
  return json.replace(
    /[\x7f-\x9f\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Standard output: the command's result. */
export function writeOut(text: string): void {
  process.stdout.write(terminalSafe(text));
}

/** Standard error: messages for the person at the terminal. */
export function writeErr(text: string): void {
  process.stderr.write(terminalSafe(text));
}

/**
 * A progress line on stderr while waiting: a spinner redrawn in place on a terminal; elsewhere (pipes, CI, tests)
 * one line per change of the message, so logs stay readable.
 */
export class Progress {
  static readonly FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
  #message = '';
  #frame = 0;
  #timer: NodeJS.Timeout | undefined;
  readonly #tty: boolean;

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.#tty = Boolean(stream.isTTY);
  }

  update(text: string): void {
    const message = terminalSafe(text);
    if (message === this.#message) return;
    this.#message = message;
    if (!this.#tty) {
      this.stream.write(`${message}\n`);
      return;
    }
    this.#timer ??= setInterval(() => this.#draw(), 80);
    this.#draw();
  }

  stop(finalLine?: string): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    if (this.#tty && this.#message) this.stream.write('\r\x1b[2K');
    if (finalLine) this.stream.write(`${terminalSafe(finalLine)}\n`);
    this.#message = '';
  }

  #draw(): void {
    const frame = Progress.FRAMES[this.#frame++ % Progress.FRAMES.length];
    this.stream.write(`\r\x1b[2K${frame} ${this.#message}`);
  }
}

/** Asks a question on the terminal; `hidden` does not echo what is typed (passwords). */
export async function ask(question: string, options: { hidden?: boolean } = {}): Promise<string> {
  let muted = false;
  const output = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (!muted) process.stderr.write(chunk);
      done();
    },
  });
  const rl = createInterface({ input: process.stdin, output, terminal: Boolean(process.stdin.isTTY) });
  try {
    const answer = rl.question(terminalSafe(question));
    muted = Boolean(options.hidden);
    return (await answer).trim();
  } finally {
    rl.close();
    if (options.hidden) process.stderr.write('\n');
  }
}

/** All of standard input (for `--password-stdin`), without the final line break. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}
