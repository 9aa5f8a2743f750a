import { Command } from 'commander';
import pkg from '../../package.json' with { type: 'json' };
import { API_KEY_VARIABLE, API_URL_VARIABLE, Cli, DEFAULT_API_URL } from './cli.js';
import { addGroupExamples, documented, examplesText } from './command-group.js';
import { commandGroups } from './commands/index.js';
import { bashCompletion, zshCompletion } from './completion.js';
import { CliError, EXIT } from './exit-codes.js';
import { writeOut } from './output.js';

/** The whole `cloud` command tree, without running anything (main.ts parses the arguments with it). */
export function buildProgram(env: NodeJS.ProcessEnv = process.env): { program: Command; cli: Cli } {
  const program = new Command('cloud')
    .description(
      'Manage Cloud Platform resources: VPN connections, sites, databases, billing, webhooks, users, API keys, ' +
        'the audit log and the organization.',
    )
    .version(pkg.version, '-v, --version')
    .option('--json', 'print the API’s answer as JSON (for scripts)')
    .option(
      '--api-url <url>',
      `the API address (default: $${API_URL_VARIABLE}, the login’s, or ${DEFAULT_API_URL})`,
    )
    .addHelpText(
      'after',
      `\nSign in with \`cloud login\`, or set ${API_KEY_VARIABLE}. Exit status: 0 ok, 1 failed, 2 usage, ` +
        '3 authentication, 4 not found, 5 refused (conflict, limit, payment), 6 unavailable.' +
        examplesText([
          'cloud login --email ada@example.com',
          'cloud databases create orders --engine postgresql --wait',
          'cloud sites deploy site_123 --follow',
          'cloud completion bash >> ~/.bashrc',
        ]),
    )
    .exitOverride();
  // Settings given before the commands are added are inherited by every subcommand.
  const cli = new Cli(program, env);
  for (const group of commandGroups) group.register(program, cli);

  documented(
    program
      .command('completion')
      .description('print the shell completion script (bash or zsh) for the commands of this version')
      .argument('<shell>', 'bash or zsh'),
    {
      calls: [],
      examples: [
        'source <(cloud completion bash)   # in ~/.bashrc',
        'source <(cloud completion zsh)    # in ~/.zshrc',
      ],
    },
  ).action((shell: string) => {
    if (shell === 'bash') writeOut(bashCompletion(program));
    else if (shell === 'zsh') writeOut(zshCompletion(program));
    else throw new CliError(`no completion for ${shell}: use bash or zsh`, EXIT.USAGE);
  });
  addGroupExamples(program);
  return { program, cli };
}

/** The words of the command `argv` runs (`['databases', 'show']`), and the command listing what it works on. */
export function commandContext(
  program: Command,
  argv: readonly string[],
): { command: string[]; listCommand?: string } {
  const path: string[] = [];
  const chain: Command[] = [program];
  for (const word of argv) {
    if (word.startsWith('-')) continue;
    const child = chain.at(-1)!.commands.find((c) => c.name() === word);
    if (!child) continue;
    path.push(word);
    chain.push(child);
  }
  for (let i = chain.length - 1; i >= 0; i--) {
    if (chain[i]!.commands.some((c) => c.name() === 'list')) {
      return { command: path, listCommand: ['cloud', ...path.slice(0, i), 'list'].join(' ') };
    }
  }
  return { command: path };
}
