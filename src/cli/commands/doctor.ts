/** `combine doctor [--live]`: what stands between this machine and paid work, each with what to do. */
import { Command } from 'commander';
import type { Check } from '../doctor.js';
import { color, EXIT, print, statusColor } from '../output.js';

function render(checks: Check[], live: boolean): string {
  const c = color();
  const lines = live ? [c.dim('--live: one small provider call was made (it costs a call)'), ''] : [];
  const width = Math.max(...checks.map((k) => k.name.length));
  for (const k of checks) {
    lines.push(`${statusColor(k.status)(k.status.padEnd(4))}  ${k.name.padEnd(width)}  ${k.message}`);
    if (k.fix && (k.status === 'warn' || k.status === 'fail')) lines.push(`      ${' '.repeat(width)}  ${c.dim('→')} ${k.fix}`);
  }
  const failed = checks.filter((k) => k.status === 'fail').length;
  const warned = checks.filter((k) => k.status === 'warn').length;
  lines.push('', failed > 0 ? c.red(`${failed} check${failed === 1 ? '' : 's'} failed`) : warned > 0 ? c.yellow(`ready, with ${warned} warning${warned === 1 ? '' : 's'}`) : c.green('ready'));
  return lines.join('\n');
}

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
      const { runDoctor } = await import('../doctor.js');
      const checks = await runDoctor(getHome(), process.env, !!opts.live);
      const ok = checks.every((k) => k.status !== 'fail');
      await print(opts, { ok, live: !!opts.live, checks }, () => render(checks, !!opts.live));
      if (!ok) process.exitCode = EXIT.FAILED;
    });
}
