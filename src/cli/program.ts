/**
 * The `combine` command tree. Separate from main.ts (which runs it) so that shell completion and tests
 * can walk the same tree: a command added here appears in `combine completion` by itself.
 */
import { Command } from 'commander';
import { briefingCommand } from './commands/briefing.js';
import { completionCommand } from './commands/completion.js';
import { daemonCommand } from './commands/daemon.js';
import { demoCommands } from './commands/demo.js';
import { doctorCommand } from './commands/doctor.js';
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
import { resolveHome } from '../core/home.js';

declare const __COMBINE_VERSION__: string;

/** A first word that is no command: main.ts answers it with suggestions. */
export class UnknownCommandError extends Error {
  constructor(
    readonly word: string,
    readonly program: Command,
  ) {
    super(`unknown command '${word}'`);
  }
}

export function buildProgram(): Command {
  const getHome = () => resolveHome();
  const program = new Command('combine')
    .description('Durable, audited execution of paid LLM operations: no lost answers, no double payment, no corrupt documents.')
    .version(typeof __COMBINE_VERSION__ === 'string' ? __COMBINE_VERSION__ : 'dev')
    .option('--no-color', 'no colour (also: NO_COLOR=1, or any pipe)')
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText(
      'after',
      [
        '',
        'Ids: a thread or schedule id can be given whole, as the short id tables show, or as any unique prefix.',
        'Environment: COMBINE_HOME (state directory), OPENAI_BASE_URL, OPENAI_API_KEY, COMBINE_MODEL, NO_COLOR.',
        'Exit codes: 0 ok, 1 operation failed, 2 bad usage or input, 3 daemon unreachable, 130 interrupted.',
        '',
        'Try it offline:  combine demo        Check a setup:  combine doctor',
        'Shell completion:  combine completion bash|zsh|fish --help',
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
    doctorCommand(getHome),
    ...demoCommands(),
    completionCommand(() => program),
  ];
  for (const c of commands) program.addCommand(c);
  // An unknown command gets suggestions by meaning and by spelling (suggest.ts, loaded only then), exit 2.
  program.on('command:*', (operands: string[]) => {
    throw new UnknownCommandError(operands[0]!, program);
  });
  // Usage errors anywhere in the tree exit 2, not commander's default 1.
  const exitOverride = (cmd: Command) => {
    cmd.exitOverride();
    cmd.commands.forEach(exitOverride);
  };
  exitOverride(program);
  return program;
}
