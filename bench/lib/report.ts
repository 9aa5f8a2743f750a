import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** One printed figure, kept for the JSON copy of the run. */
export interface Figure {
  section: string;
  label: string;
  value: number | null;
  unit: string;
  /** What the figure is measured against, as printed ("≥ 3,000 req/s (0.6 × baseline)"). */
  target?: string;
  /** Whether the target was reached; informational only, the bench never fails on it. */
  met?: boolean;
}

const number = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

export function fmt(n: number | null, digits = 1): string {
  if (n === null || !Number.isFinite(n)) return 'n/a';
  return digits === 1 ? number.format(n) : n.toFixed(digits);
}

/** Prints figures beside their targets as they come, and keeps them for the summary and the JSON file. */
export class Report {
  readonly figures: Figure[] = [];
  readonly notes: string[] = [];
  private current = '';

  section(title: string): void {
    this.current = title;
    console.log(`\n== ${title}`);
  }

  figure(
    label: string,
    value: number | null,
    unit: string,
    opts: { target?: string; met?: boolean } = {},
  ): void {
    this.figures.push({ section: this.current, label, value, unit, ...opts });
    console.log(`   ${line(label, value, unit, opts)}`);
  }

  note(text: string): void {
    this.notes.push(`${this.current}: ${text}`);
    console.log(`   · ${text}`);
  }

  /** Every figure again, grouped by section, for a reader who scrolled past the progress output. */
  printSummary(): void {
    console.log('\n== Summary');
    let section = '';
    for (const f of this.figures) {
      if (f.section !== section) {
        section = f.section;
        console.log(`   [${section}]`);
      }
      console.log(`   ${line(f.label, f.value, f.unit, f)}`);
    }
  }

  /** Writes the figures to `<dir>/bench-<timestamp>.json` (bench/results/ is not committed). */
  save(dir: string, meta: Record<string, unknown>): string {
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(
      file,
      `${JSON.stringify({ ...meta, figures: this.figures, notes: this.notes }, null, 2)}\n`,
    );
    return file;
  }
}

function line(label: string, value: number | null, unit: string, opts: { target?: string; met?: boolean }) {
  const figure = `${fmt(value)} ${unit}`;
  const target = opts.target ? `target ${opts.target}` : '';
  const verdict = opts.met === undefined ? '' : opts.met ? '  (met)' : '  (NOT met)';
  return `${label.padEnd(44)} ${figure.padStart(16)}   ${target}${verdict}`.trimEnd();
}
