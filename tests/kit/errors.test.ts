// Test tier: unit
import { readdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { AppError, invalidInput, validation } from '../../server/lib/errors.js';
import { errorFormViolations } from './error-rules.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MODULES = resolve(ROOT, 'server/modules');

describe('one way to fail (docs/adding-a-module.md, "Checklist", steps 3 and 7)', () => {
  const modules = readdirSync(MODULES, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name);

  it('every module throws the shared constructors and declares its errors by code', () => {
    const found = [
      ...modules.flatMap((m) => errorFormViolations(resolve(MODULES, m), ROOT)),
      ...errorFormViolations(resolve(ROOT, 'server/kit'), ROOT),
    ];
    expect(found.map((v) => `${v.file}:${v.line} ${v.rule}`)).to.deep.equal([]);
  });

  it('the rules catch the other forms', () => {
    const dir = resolve(ROOT, 'tests/kit/fixtures/error-forms');
    const rules = errorFormViolations(dir, ROOT).map((v) => v.rule.split(' ')[0]);
    expect(rules).to.include('throws').and.to.include('declares');
  });

  it('a validation error has one wording: "Invalid request: <path>: <message>", with the detail', () => {
    const e = validation('until', 'Must not be before since');
    expect(e).to.be.instanceOf(AppError);
    expect(e.status).to.equal(400);
    expect(e.message).to.equal('Invalid request: until: Must not be before since');
    expect(e.details).to.deep.equal([{ path: 'until', message: 'Must not be before since' }]);
    const several = invalidInput([
      { path: 'a', message: 'Required' },
      { path: 'b', message: 'Unknown field' },
    ]);
    expect(several.message).to.equal('Invalid request: a: Required');
    expect(several.details).to.have.length(2);
  });
});
