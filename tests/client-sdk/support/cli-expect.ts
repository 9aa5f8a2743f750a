import { expect } from 'chai';
import { stderrLines, type CliRun } from './run-cli.js';

/** `--json` output, parsed (the test fails if it does not parse). */
export const json = <T = Record<string, any>>(run: CliRun): T => JSON.parse(run.stdout) as T;

/** Success: exit 0 and no error line. */
export function expectOk(run: CliRun): CliRun {
  expect(
    run.stderr.split('\n').filter((l) => l.startsWith('error')),
    run.stderr,
  ).to.deep.equal([]);
  expect(run.code, run.stderr).to.equal(0);
  return run;
}

/**
 * A failure: exit status `code`, stdout empty, and on stderr exactly one error line matching `line`, then at most one
 * `hint: ` line (matching `hint` when given; absent when `hint` is null).
 */
export function expectFailure(run: CliRun, code: number, line: RegExp, hint?: RegExp | null): void {
  expect(run.code, run.stdout + run.stderr).to.equal(code);
  expect(run.stdout).to.equal('');
  const lines = stderrLines(run);
  const hints = lines.filter((l) => l.startsWith('hint: '));
  const errors = lines.filter((l) => !l.startsWith('hint: '));
  expect(errors, run.stderr).to.have.length(1);
  expect(errors[0]).to.match(line);
  expect(hints, run.stderr).to.have.length.at.most(1);
  if (hints.length === 1) expect(lines.at(-1)).to.equal(hints[0]);
  if (hint === null) expect(hints, run.stderr).to.deep.equal([]);
  else if (hint) expect(hints[0], run.stderr).to.match(hint);
}
