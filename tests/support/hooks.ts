import { resetPostgres } from './db-reset.js';
import { takeContractViolations } from './contract.js';
import { closeSharedServer } from './server.js';

/** Fails the current test with the responses it caused that the OpenAPI document does not allow (./contract.ts). */
function failOnContractViolations(ctx: Mocha.Context): void {
  const violations = takeContractViolations();
  if (violations.length === 0) return;
  const err = new Error(
    `${violations.length} response(s) do not match the OpenAPI document:\n  ${violations.join('\n  ')}`,
  );
  // Mocha's Runnable#error (untyped): the error fails the current test itself, not the hook (a failed hook would
  // skip the rest of its suite).
  (ctx.test as (Mocha.Runnable & { error(err: Error): void }) | undefined)?.error(err);
}

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    if (process.env.DATABASE_URL) await resetPostgres(process.env.DATABASE_URL);
  },
  afterEach(this: Mocha.Context) {
    failOnContractViolations(this);
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    await closeSharedServer();
  },
};
