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
