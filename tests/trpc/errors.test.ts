// Test tier: unit
import { expect } from 'chai';
import { toAppError } from '../../server/trpc/init.js';

describe('error conversion (server/trpc/init.ts)', () => {
  it('answers a unique violation 409 CONFLICT however it arrives: driver error, wrapped, or by name', () => {
    const driver = Object.assign(new Error('duplicate key value violates unique constraint "x"'), {
      code: '23505',
    });
    expect(toAppError(driver).code).to.equal('CONFLICT');
    expect(toAppError(new Error('wrapped', { cause: driver })).code).to.equal('CONFLICT');
    const named = new Error('dup');
    named.name = 'UniqueConstraintViolationException';
    expect(toAppError(named).code).to.equal('CONFLICT');
    // Never the driver's message.
    expect(toAppError(driver).message).to.not.include('duplicate key');
  });

  it('leaves other database errors a generic 500', () => {
    const other = Object.assign(new Error('syntax error at or near'), { code: '42601' });
    const app = toAppError(other);
    expect(app.code).to.equal('INTERNAL_ERROR');
    expect(app.message).to.equal('Internal server error');
  });
});
