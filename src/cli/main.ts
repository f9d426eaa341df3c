/**
 * The `combine` CLI: parse, call the daemon, print. Exit codes: 0 ok, 1 the operation failed,
 * 2 bad usage or input, 3 daemon unreachable, 130 interrupted (Ctrl-C while following).
 */
import { CommanderError } from 'commander';
import { CliError, errColor, EXIT } from './output.js';
import { buildProgram } from './program.js';

/** `combine … | head -1`: the reader left; that is not an error, and no stack trace is printed. */
function endQuietlyOnBrokenPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(EXIT.OK);
      throw err;
    });
  }
}

async function main(): Promise<void> {
  endQuietlyOnBrokenPipe();
  const program = buildProgram();
  // Bare `combine`: the help, on stdout, as a successful answer.
  if (process.argv.length <= 2) {
    program.outputHelp();
    return;
  }
  try {
    await program.parseAsync(process.argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help' ? EXIT.OK : EXIT.USAGE;
      return;
    }
    if (err instanceof CliError) {
      process.stderr.write(`${errColor().red('combine:')} ${err.message}\n`);
      process.exitCode = err.exitCode;
      return;
    }
    process.stderr.write(`combine: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exitCode = EXIT.FAILED;
  }
}

void main();
