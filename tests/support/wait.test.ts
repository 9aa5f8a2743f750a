// Test tier: unit
import { expect } from 'chai';
import { rejection } from './rejection.js';
import { waitFor } from './wait.js';

describe("waitFor (the tests' polling helper)", () => {
  it('returns the first truthy answer of the probe, sync or async', async () => {
    let n = 0;
    expect(await waitFor('n to reach 3', () => ++n >= 3 && n, { intervalMs: 1 })).to.equal(3);
    const answers = [undefined, null, false, 0, '', { done: true }];
    expect(await waitFor('a truthy answer', async () => answers.shift(), { intervalMs: 1 })).to.deep.equal({
      done: true,
    });
  });

  it("ends with the probe's own error at once when the probe throws", async () => {
    const started = Date.now();
    let tries = 0;
    const err = (await rejection(
      waitFor(
        'never',
        async () => {
          tries += 1;
          if (tries === 2) throw new Error('failed for good');
          return undefined;
        },
        { timeoutMs: 5_000, intervalMs: 1 },
      ),
    )) as Error;
    expect(err).to.be.an('error').with.property('message', 'failed for good');
    expect(tries).to.equal(2);
    expect(Date.now() - started).to.be.below(2_000);
  });

  it('past the deadline, throws an error naming what it waited for and the last answer', async () => {
    let last = 0;
    const err = (await rejection(
      waitFor('a miracle', () => (last += 1) < 0, { timeoutMs: 50, intervalMs: 5 }),
    )) as Error;
    expect(err).to.be.an('error');
    expect(err.message).to.equal('timed out after 50 ms waiting for a miracle (last: false)');
    expect(last).to.be.at.least(2);
    let seen = 'nothing';
    const lazy = (await rejection(
      waitFor(
        () => `the state to change (seen: ${seen})`,
        () => {
          seen = 'pending';
          return undefined;
        },
        { timeoutMs: 10, intervalMs: 5 },
      ),
    )) as Error;
    expect(lazy.message).to.equal(
      'timed out after 10 ms waiting for the state to change (seen: pending) (last: undefined)',
    );
  });
});
