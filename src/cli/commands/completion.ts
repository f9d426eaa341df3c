/** `combine completion bash|zsh|fish`: a completion script generated from the live command tree. */
import { Command } from 'commander';
import { EXIT } from '../output.js';
import { CliError } from '../../core/errors.js';

const SHELLS = ['bash', 'zsh', 'fish'] as const;

export function completionCommand(getProgram: () => Command): Command {
  return new Command('completion')
    .argument('<shell>', SHELLS.join(' | '))
    .description('print a shell completion script for combine (generated from its commands; costs nothing at start-up)')
    .addHelpText(
      'after',
      [
        '',
        'Install:',
        '  bash:  combine completion bash > ~/.local/share/bash-completion/completions/combine',
        '  zsh:   combine completion zsh > "${fpath[1]}/_combine"      # then: autoload -U compinit && compinit',
        '  fish:  combine completion fish > ~/.config/fish/completions/combine.fish',
        'Or for this shell only:  source <(combine completion bash)',
      ].join('\n'),
    )
    .action(async (shell: string) => {
      if (!(SHELLS as readonly string[]).includes(shell))
        throw new CliError(`completion: "${shell}" is not a supported shell (${SHELLS.join(', ')})`, EXIT.USAGE);
      // The generator is its own chunk: loading it is paid only by this command.
      const { completionScript } = await import('../completion.js');
      process.stdout.write(completionScript(shell as (typeof SHELLS)[number], getProgram()));
    });
}
