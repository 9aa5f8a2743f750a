import { loadConfig, type Config } from '../../server/config.js';

/**
 * The suite runs on the embedded PGlite (in memory) by default and on PostgreSQL when DATABASE_URL is set.
 * Tests use a low bcrypt cost, a short provisioning delay a burst limit that a test's loop of calls with one token
 * does not reach and a per-address limit of the unauthenticated endpoints that the whole suite does not reach (tests of the limit start their own server); everything else is the documented default.
 */
/**
 * The suite's at-rest key (TWO_FACTOR_KEY): every server started on the run's database, in process or as a child
 * process, needs it, since a server whose key opens nothing stored refuses to start (docs/security.md).
 */
export const TEST_AT_REST_KEY = 'test-at-rest-key-test-at-rest-key-0123456789';

export function testConfig(overrides: Record<string, string | undefined> = {}): Config {
  return loadConfig({
    NODE_ENV: 'test',
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: process.env.TEST_DATA_DIR ?? '.data-test',
    DATABASE_URL: process.env.DATABASE_URL,
    JWT_SECRET: 'test-secret-test-secret-test-secret-0123456789',
    // One at-rest key for every test server, whatever its DATA_DIR: a server started on the run's database with
    // another key would refuse to start (docs/security.md, "Rotating the at-rest key").
    TWO_FACTOR_KEY: TEST_AT_REST_KEY,
    BCRYPT_COST: '4',
    PROVISIONING_DELAY_MS: '200',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_RETRY_SCHEDULE: '200ms,400ms',
    RATE_LIMIT_BURST: '10000',
    // The suite logs in from 127.0.0.1 thousands of times; the per-address limit has its own test.
    AUTH_RATE_LIMIT: '1000000',
    // The suite's real databases share this machine's servers (max_connections 100): their connection limits are
    // not held to it, except by the tests of a server's capacity, which unset this.
    DATABASE_SERVER_MAX_CONNECTIONS: '1000000',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...overrides,
  });
}

export const usingPostgres = Boolean(process.env.DATABASE_URL);
