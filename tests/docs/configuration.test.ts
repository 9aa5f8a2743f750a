// Test tier: unit
import { expect } from 'chai';
import { read } from './markdown.js';

/**
 * docs/configuration.md names every environment variable the server reads: the keys of the one Zod schema of
 * server/config.ts (README, "Configuration for a first run").
 */
describe('docs/configuration.md', () => {
  it('documents every variable of server/config.ts', () => {
    const source = read('server/config.ts');
    const schema = source.slice(
      source.indexOf('z.object({'),
      source.indexOf('\n});', source.indexOf('z.object({')),
    );
    const variables = [...schema.matchAll(/^ {2}([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]!);
    expect(variables).to.include.members(['PORT', 'DATABASE_URL', 'JWT_SECRET']);
    const guide = read('docs/configuration.md');
    const missing = variables.filter((v) => !guide.includes('`' + v + '`'));
    expect(missing, 'variables of server/config.ts missing from docs/configuration.md').to.deep.equal([]);
  });
});
