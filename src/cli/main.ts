/**
 * The `combine` CLI: parse, call the daemon, print. Exit codes: 0 ok, 1 the operation failed,
 * 2 bad usage or input, 3 daemon unreachable, 130 interrupted (Ctrl-C while following).
 */
import { CommanderError } from 'commander';
import { errColor, EXIT } from './output.js';
import { buildProgram, UnknownCommandError } from './program.js';
import { CliError } from '../core/errors.js';

/**
 * `combine … | head -1`: the reader left; that is not an error, and no stack trace is printed. Only
 * stdout's own EPIPE is that: any other (a socket or pipe the command writes to, closed at the other
 * end) is a failure like any uncaught error. So stdout gets its own listener — an uncaught error does not
 * say which stream emitted it, and stdout's `errored` is reset before its 'error' is emitted (Node's
 * stdio streams are never destroyed). stdout is made here rather than at the first output, which nearly
 * every command writes anyway; stderr is not listened to, which keeps start-up from creating it (~5M
 * instructions). So an EPIPE on stderr (`combine … 2>&1 | head -1`, when a stderr write is the first to
 * meet the closed pipe) is exit 1, its message lost with the pipe: rare, as stdout usually breaks first.
 */
function endQuietlyOnBrokenPipe(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err?.code === 'EPIPE') process.exit(EXIT.OK);
    failUnexpectedly(err);
  });
  process.on('uncaughtException', failUnexpectedly);
}

function failUnexpectedly(err: Error): never {
  process.stderr.write(`combine: unexpected error: ${err?.stack ?? String(err)}\n`);
  process.exit(EXIT.FAILED);
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
