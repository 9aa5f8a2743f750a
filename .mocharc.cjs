// The test suite in tiers (docs/development.md, "Tests"). Every test file names its tier on its first line,
// `// Test tier: <tier>`:
//   unit     no database, no server
//   db       a database, no HTTP
//   server   HTTP on test servers (in this process or in child processes)
//   process  subprocesses whose subject is not the API's database: the CLI, the SDK package, Chromium, sandboxed
//            builds, the VPN agent, real database servers and their tools, several servers on one PostgreSQL
// TEST_TIERS (comma-separated) runs only those tiers; without it, all of them. A file without a tier, or with an
// unknown one, stops the run before any test. Files named on the command line run alone.
const { readdirSync, readFileSync } = require('node:fs');
const { join } = require('node:path');

const TIERS = ['unit', 'db', 'server', 'process'];
const TAG = /^\/\/ Test tier: ([a-z]+)$/;

function tierOf(file) {
  const first = readFileSync(file, 'utf8').split('\n', 1)[0];
  const tier = TAG.exec(first)?.[1];
  if (!tier || !TIERS.includes(tier)) {
    throw new Error(
      `${file}: the first line must be "// Test tier: <${TIERS.join('|')}>" (docs/development.md, "Tests")`,
    );
  }
  return tier;
}

const wanted = (process.env.TEST_TIERS || TIERS.join(','))
  .split(',')
  .map((t) => t.trim())
  .filter(Boolean);
for (const t of wanted) {
  if (!TIERS.includes(t)) throw new Error(`TEST_TIERS: unknown tier "${t}" (${TIERS.join(', ')})`);
}

const files = readdirSync('tests', { recursive: true })
  .filter((f) => f.endsWith('.test.ts'))
  .map((f) => join('tests', f))
  .sort();
const tiered = files.filter((f) => wanted.includes(tierOf(f)));
// `npm test -- tests/x.test.ts`: that file alone, whatever its tier.
const named = process.argv.slice(2).some((a) => /\.test\.ts$/.test(a));
const spec = named ? [] : tiered;

module.exports = {
  'node-option': ['import=tsx', 'conditions=@cloud-platform/source'],
  spec,
  require: ['tests/support/hooks.ts'],
  timeout: 30000,
  exit: true,
};
