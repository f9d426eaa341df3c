/**
 * The `combine` CLI: parse, call the daemon, print. Exit codes: 0 ok, 1 the operation failed,
 * 2 bad usage or input, 3 daemon unreachable.
 */
import { Command, CommanderError } from 'commander';
import { briefingCommand } from './commands/briefing.js';
import { daemonCommand } from './commands/daemon.js';
import { demoCommands } from './commands/demo.js';
import { generateCommands } from './commands/generate.js';
import { infoCommands } from './commands/info.js';
import { ledgerCommand } from './commands/ledger.js';
import { logsCommand } from './commands/logs.js';
import { operationCommands } from './commands/operations.js';
import { projectCommand } from './commands/project.js';
import { pruneCommand } from './commands/prune.js';
import { replayCommand } from './commands/replay.js';
import { scheduleCommand } from './commands/schedule.js';
import { threadCommands } from './commands/threads.js';
import { uiCommand } from './commands/ui.js';
import { usageCommands } from './commands/usage.js';
import { resolveHome } from './home.js';
import { EXIT } from './output.js';
import { CliError } from '../core/errors.js';

declare const __COMBINE_VERSION__: string;

function buildProgram(): Command {
  const getHome = () => resolveHome();
  const program = new Command('combine')
    .description('Durable, audited execution of paid LLM operations: no lost answers, no double payment, no corrupt documents.')
    .version(typeof __COMBINE_VERSION__ === 'string' ? __COMBINE_VERSION__ : 'dev')
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText(
      'after',
      [
        '',
        'Environment: COMBINE_HOME (state directory), OPENAI_BASE_URL, OPENAI_API_KEY, COMBINE_MODEL.',
        'Exit codes: 0 ok, 1 operation failed, 2 bad usage or input, 3 daemon unreachable.',
        '',
        'Try it offline:  combine demo',
      ].join('\n'),
    );
  const commands = [
    daemonCommand(getHome),
    projectCommand(getHome),
    ...generateCommands(getHome),
    ...operationCommands(getHome),
    ...threadCommands(getHome),
    scheduleCommand(getHome),
    briefingCommand(getHome),
    ledgerCommand(getHome),
    replayCommand(getHome),
    ...infoCommands(getHome),
    ...usageCommands(getHome),
    logsCommand(getHome),
    uiCommand(getHome),
    pruneCommand(getHome),
    ...demoCommands(),
  ];
  for (const c of commands) program.addCommand(c);
  // Usage errors anywhere in the tree exit 2, not commander's default 1.
  const exitOverride = (cmd: Command) => {
    cmd.exitOverride();
    cmd.commands.forEach(exitOverride);
  };
  exitOverride(program);
  return program;
}

async function main(): Promise<void> {
  try {
    await buildProgram().parseAsync(process.argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help' ? EXIT.OK : EXIT.USAGE;
      return;
    }
    if (err instanceof CliError) {
      process.stderr.write(`combine: ${err.message}\n`);
      process.exitCode = err.exitCode;
      return;
    }
    process.stderr.write(`combine: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exitCode = EXIT.FAILED;
  }
}

void main();
