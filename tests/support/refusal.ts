import { expect } from 'chai';
import { AppError } from '../../server/lib/errors.js';

/** The AppError that `work` throws (a state machine refusing a move); fails the test when it throws none. */
export function refusal(work: () => void): AppError {
  try {
    work();
  } catch (e) {
    expect(e).to.be.instanceOf(AppError);
    return e as AppError;
  }
  throw new Error('the move was not refused');
}
