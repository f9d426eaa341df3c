/** `combine doctor [--live]`: what stands between this machine and paid work, each with what to do. */
import { Command } from 'commander';
import { EXIT, print } from '../output.js';

export function doctorCommand(getHome: () => string): Command {
  return new Command('doctor')
    .description('check the provider (endpoint, key, model), the home directory, the disk and the daemon; exit 1 if a check fails')
    .option('--live', 'also make one small provider call to check structured output (it costs a call)')
    .option('--json', 'print machine-readable JSON')
    .addHelpText(
      'after',
      [
        '',
        'Without --live nothing is paid: the provider is asked only for its model list (GET /models).',
        '',
        'Examples:',
        '  combine doctor',
        '  combine doctor --live',
        '  combine doctor --json',
      ].join('\n'),
    )
    .action(async (opts: { live?: boolean; json?: boolean }) => {
      // The checks and their rendering are one chunk, loaded by this command only.
      const { renderDoctor, runDoctor } = await import('../doctor.js');
      const checks = await runDoctor(getHome(), process.env, !!opts.live);
      const ok = checks.every((k) => k.status !== 'fail');
      await print(opts, { ok, live: !!opts.live, checks }, () => renderDoctor(checks, !!opts.live));
      if (!ok) process.exitCode = EXIT.FAILED;
    });
}
