import type { Command } from 'commander';
import type { Cli } from './cli.js';

/**
 * One module's commands (client-sdk/README.md, "Adding a command group"): `register` adds them to the program, with
 * a description and `--help` for each, and calls the API through `cli.client()`.
 */
export interface CommandGroup {
  /** The top-level command (`vpn`), or a label for groups that add several top-level commands (`auth`). */
  readonly name: string;
  register(program: Command, cli: Cli): void;
}

export const defineCommandGroup = (group: CommandGroup): CommandGroup => group;

/** What a command that runs something declares (docs/cli.md, "Adding a command"). */
export interface CommandSpec {
  /**
   * The operationIds of the OpenAPI document (`GET /v1/openapi.json`) the command calls. tests/client-sdk/cli-coverage
   * checks that every operation has a command; an empty list is for commands that call no operation (completion).
   */
  readonly calls: readonly string[];
  /** Command lines shown under "Examples:" in the command's `--help`, at least one. */
  readonly examples: readonly string[];
}

const specs = new WeakMap<Command, CommandSpec>();

/** Declares what `command` calls and how it is used; its `--help` ends with the examples. */
export function documented(command: Command, spec: CommandSpec): Command {
  if (spec.examples.length === 0) throw new Error(`${command.name()}: a command needs an example`);
  specs.set(command, spec);
  command.addHelpText('after', examplesText(spec.examples));
  return command;
}

export const commandSpec = (command: Command): CommandSpec | undefined => specs.get(command);

export const examplesText = (examples: readonly string[]) =>
  `\nExample${examples.length > 1 ? 's' : ''}:\n${examples.map((e) => `  $ ${e}`).join('\n')}`;

/** Every command of the tree under `root` (itself included), depth first, with its words (`databases create`). */
export function* walkCommands(
  root: Command,
  path: string[] = [],
): Generator<{ command: Command; path: string[] }> {
  yield { command: root, path };
  for (const child of root.commands) yield* walkCommands(child, [...path, child.name()]);
}

/**
 * A group without its own examples (`cloud databases`) shows the first example of each of its commands (at most
 * four), so that every `--help` has one.
 */
export function addGroupExamples(root: Command): void {
  for (const { command } of walkCommands(root)) {
    if (command.commands.length === 0 || specs.has(command)) continue;
    const examples = [...walkCommands(command)]
      .map(({ command: c }) => specs.get(c)?.examples[0])
      .filter((e): e is string => e !== undefined)
      .slice(0, 4);
    if (examples.length > 0) command.addHelpText('after', examplesText(examples));
  }
}
