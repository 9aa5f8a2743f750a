// Test tier: process
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { buildOpenApiDocument } from '../../server/openapi.js';

const run = promisify(execFile);
const dir = join(import.meta.dirname, 'typed-client');
const bin = (name: string) => join(import.meta.dirname, '..', '..', 'node_modules', '.bin', name);

describe('OpenAPI document: a client generated with openapi-typescript', () => {
  it('type-checks a program that reads a webhook, a user and a delivery and writes them back without a cast', async function () {
    this.timeout(120_000);
    mkdirSync(join(dir, 'generated'), { recursive: true });
    const source = join(dir, 'generated', 'openapi.json');
    writeFileSync(source, JSON.stringify(buildOpenApiDocument()));
    await run(bin('openapi-typescript'), [source, '-o', join(dir, 'generated', 'openapi.d.ts')]);
    // typed-client/program.ts also holds `@ts-expect-error` lines: a widened enum fails the check too.
    const result = await run(bin('tsc'), ['-p', join(dir, 'tsconfig.json')]).then(
      () => ({ ok: true, out: '' }),
      (err: { stdout: string; stderr: string }) => ({ ok: false, out: `${err.stdout}${err.stderr}` }),
    );
    expect(result.out).to.equal('');
    expect(result.ok).to.equal(true);
  });
});
