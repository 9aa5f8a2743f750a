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

  update(message: string): void {
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
    if (finalLine) this.stream.write(`${finalLine}\n`);
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
    const answer = rl.question(question);
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
