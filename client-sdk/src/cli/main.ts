/**
 * `cloud`: the command-line client of the Cloud Platform API, built on the SDK (client-sdk/README.md, "Command-line
 * client"). Every failure is one line on stderr (with the API's request id) and a non-zero exit status.
 */
import { Command, CommanderError } from 'commander';
import pkg from '../../package.json' with { type: 'json' };
import { API_KEY_VARIABLE, API_URL_VARIABLE, Cli, DEFAULT_API_URL } from './cli.js';
import { commandGroups } from './commands/index.js';
import { describeError, EXIT } from './exit-codes.js';
import { writeErr, writeOut } from './output.js';

export function buildProgram(): { program: Command; cli: Cli } {
  const program = new Command('cloud')
    .description(
      'Manage Cloud Platform resources: VPN connections, sites, databases, billing, webhooks, API keys and the organization.',
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
        '3 authentication, 4 not found, 5 refused (conflict, limit, payment), 6 unavailable.',
    )
    .exitOverride();
  // Settings given before the commands are added are inherited by every subcommand.
  const cli = new Cli(program);
  for (const group of commandGroups) group.register(program, cli);
  return { program, cli };
}

export async function main(argv: readonly string[]): Promise<number> {
  const { program, cli } = buildProgram();
  // Commander prints its own usage errors (one line each), then main returns the usage status.
  program.configureOutput({ writeOut, writeErr });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return EXIT.OK;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version exit 0; everything else commander refuses is a usage error (already printed).
      return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    }
    const { line, exitCode } = describeError(
      err,
      cli.usingApiKey ? { apiKeyVariable: API_KEY_VARIABLE } : {},
    );
    writeErr(`${line}\n`);
    return exitCode;
  }
}

process.exitCode = await main(process.argv.slice(2));
