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

/** A failure: exit status `code`, stdout empty, and stderr exactly one line matching `line`. */
export function expectFailure(run: CliRun, code: number, line: RegExp): void {
  expect(run.code, run.stdout + run.stderr).to.equal(code);
  expect(run.stdout).to.equal('');
  const lines = stderrLines(run);
  expect(lines, run.stderr).to.have.length(1);
  expect(lines[0]).to.match(line);
}
