// Test tier: unit
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'chai';
import { commandSpec, walkCommands } from '../../client-sdk/src/cli/command-group.js';
import { buildProgram } from '../../client-sdk/src/cli/program.js';
import { buildOpenApiDocument } from '../../server/openapi.js';

/**
 * Operations of the OpenAPI document that no `cloud` command calls on purpose, and why (docs/cli.md, "Coverage").
 * Anything else without a command fails the test below.
 */
const LEFT_OUT: Record<string, string> = {
  authRefresh:
    'the SDK under every command exchanges the refresh token itself when the access token has expired (and saves ' +
    'the new pair); there is nothing to ask for by hand',
};

function operationIds(): string[] {
  const doc = buildOpenApiDocument();
  const ids: string[] = [];
  for (const item of Object.values(doc.paths ?? {})) {
    for (const operation of Object.values(item as Record<string, { operationId?: string }>)) {
      if (operation && typeof operation === 'object' && operation.operationId)
        ids.push(operation.operationId);
    }
  }
  return ids.sort();
}

describe('cloud CLI: it covers the API', () => {
  const { program } = buildProgram({});
  const commands = [...walkCommands(program)].filter(({ command }) => command.commands.length === 0);
  const operations = operationIds();

  it('every operation of the OpenAPI document has a command, but the ones left out on purpose', () => {
    const called = new Set(commands.flatMap(({ command }) => commandSpec(command)?.calls ?? []));
    const missing = operations.filter((id) => !called.has(id) && !(id in LEFT_OUT));
    expect(
      missing,
      'operations without a `cloud` command (add one, or list it in LEFT_OUT with why)',
    ).to.deep.equal([]);
    expect(operations.length).to.be.greaterThan(70);
  });

  it('a command declares only operations the document has, and nothing left out is called after all', () => {
    const known = new Set(operations);
    for (const { command, path } of commands) {
      for (const id of commandSpec(command)?.calls ?? []) {
        expect(known.has(id), `cloud ${path.join(' ')} declares ${id}`).to.equal(true);
        expect(LEFT_OUT, `${id} is called by cloud ${path.join(' ')}`).not.to.have.property(id);
      }
    }
    for (const id of Object.keys(LEFT_OUT)) expect(known.has(id), `${id} left out`).to.equal(true);
  });

  it('every command declares what it calls and has an example in its --help', () => {
    for (const { command, path } of commands) {
      const spec = commandSpec(command);
      expect(spec, `cloud ${path.join(' ')} is not documented()`).not.to.equal(undefined);
      expect(spec!.examples.length, `cloud ${path.join(' ')}`).to.be.greaterThan(0);
      // An example runs the command it documents.
      for (const example of spec!.examples) expect(example).to.contain(`cloud ${path.join(' ')}`);
    }
    // Groups (and the program) show examples too.
    for (const { command, path } of walkCommands(program)) {
      let help = '';
      command.configureOutput({ writeOut: (s) => (help += s), writeErr: () => undefined });
      command.outputHelp();
      expect(help, `cloud ${path.join(' ')} --help`).to.match(/\nExamples?:\n {2}\$ .*cloud /);
    }
  });

  it('docs/cli.md lists every command', () => {
    const guide = readFileSync(resolve(import.meta.dirname, '../../docs/cli.md'), 'utf8');
    const missing = commands
      .map(({ path }) => `cloud ${path.join(' ')}`)
      .filter((words) => !new RegExp(`\\| \`${words}[ \`]`).test(guide));
    expect(missing, 'commands missing from the tables of docs/cli.md').to.deep.equal([]);
  });
});
