/**
 * The `combine` CLI: parse, call the daemon, print. Exit codes: 0 ok, 1 the operation failed,
 * 2 bad usage or input, 3 daemon unreachable, 130 interrupted (Ctrl-C while following).
 */
import { CommanderError } from 'commander';
import { errColor, EXIT } from './output.js';
import { buildProgram, UnknownCommandError } from './program.js';
import { CliError } from '../core/errors.js';

/**
 * `combine … | head -1`: the reader left; that is not an error, and no stack trace is printed. A write
 * to a closed pipe surfaces as an unhandled stream 'error'; catching it here, rather than with a
 * listener on each stream, keeps start-up from creating process.stderr (~5M instructions) on every run.
 */
function endQuietlyOnBrokenPipe(): void {
  process.on('uncaughtException', (err: NodeJS.ErrnoException) => {
    if (err?.code === 'EPIPE') process.exit(EXIT.OK);
    process.stderr.write(`combine: unexpected error: ${err?.stack ?? String(err)}\n`);
    process.exit(EXIT.FAILED);
  });
}

/**
 * Node exits when nothing is left to wait for, even while a command still awaits an answer that can no
 * longer come (a connection gone without an 'error'): that would be exit 0 with nothing printed. If the
 * command has not finished when the process is about to exit, say so and exit 3 — as for a daemon that
 * did not answer in time, since the command's outcome at the daemon is just as unknown.
 */
function refuseSilentExit(finished: () => boolean): void {
  process.once('beforeExit', () => {
    if (finished()) return;
    process.stderr.write(
      'combine: the command ended without an answer from the daemon (the connection closed without one); see `combine daemon status` and daemon.log\n',
    );
    process.exitCode = EXIT.UNREACHABLE;
  });
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
  } catch (caught) {
    let err = caught;
    if (err instanceof CommanderError) {
      process.exitCode = err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help' ? EXIT.OK : EXIT.USAGE;
      return;
    }
    if (err instanceof UnknownCommandError) {
      const { suggestCommands } = await import('./suggest.js');
      const suggestions = suggestCommands(err.word, err.program).map((s) => `combine ${s}`);
      const hint = suggestions.length > 0 ? `\nDid you mean: ${suggestions.join(', ')}?` : '';
      err = new CliError(`unknown command '${err.word}'${hint}\n(run combine --help for the commands)`, EXIT.USAGE);
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

let finished = false;
refuseSilentExit(() => finished);
void main().finally(() => {
  finished = true;
});
