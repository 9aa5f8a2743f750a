import { resetPostgres } from './db-reset.js';
import { closeSharedServer } from './server.js';

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    if (process.env.DATABASE_URL) await resetPostgres(process.env.DATABASE_URL);
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    await closeSharedServer();
  },
};
