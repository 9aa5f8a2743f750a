/**
 * `cloud`: the command-line client of the Cloud Platform API, built on the SDK (docs/cli.md). Every failure is one
 * line on stderr (with the API's request id), a hint line when there is something to do about it, and a non-zero
 * exit status.
 */
import { CommanderError } from 'commander';
import { API_KEY_VARIABLE } from './cli.js';
import { describeError, EXIT } from './exit-codes.js';
import { writeErr, writeOut } from './output.js';
import { buildProgram, commandContext } from './program.js';

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
    const { line, hint, exitCode } = describeError(err, {
      ...commandContext(program, argv),
      ...(cli.usingApiKey ? { apiKeyVariable: API_KEY_VARIABLE } : {}),
    });
    writeErr(`${line}\n`);
    if (hint) writeErr(`hint: ${hint}\n`);
    return exitCode;
  }
}

process.exitCode = await main(process.argv.slice(2));
