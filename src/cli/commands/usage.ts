/** `combine usage` (tokens and cost per project and day, with budgets) and `combine config show`. */
import { Command } from 'commander';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { costText, describeUsage, formatUsd } from '../money.js';
import { print, table } from '../output.js';

export function usageCommands(getHome: () => string): Command[] {
  const usage = withCommonOptions(
    new Command('usage')
      .description('tokens and cost per project and UTC day (wasted and in-doubt calls included), and each budget')
      .option('--project <id>', 'only this project')
      .addHelpText('after', '\nExamples:\n  combine usage\n  combine usage --project acme --json'),
  ).action(async (opts: CommonOptions & { project?: string }) => {
    const u = await withDaemon(getHome(), opts, ({ client }, signal) => client.usage.query({ project_id: opts.project ?? null }, { signal }));
    await print(opts, u, () => {
      const lines =
        u.rows.length === 0
          ? ['no provider calls yet']
          : [
              table([
                ['DAY', 'PROJECT', 'CALLS', 'PROMPT', 'COMPLETION', 'TOTAL', 'COST', 'WASTED', 'IN DOUBT'],
                ...u.rows.map((r) => [
                  r.day,
                  r.project_id,
                  String(r.calls),
                  String(r.prompt_tokens),
                  String(r.completion_tokens),
                  String(r.total_tokens),
                  costText(r),
                  `${r.wasted_calls} (${r.wasted_tokens} tok)`,
                  `${r.in_doubt_calls} (≤${r.in_doubt_tokens} tok)`,
                ]),
              ]),
              '',
              `total: ${describeUsage(u.totals)}`,
            ];
      const budgets = u.budgets.filter((b) => Object.values(b.limits).some((v) => v !== undefined));
      for (const b of budgets) {
        const parts = Object.entries(b.limits)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]) => {
            const spent = k.startsWith('daily') ? b.spent_today : b.spent_total;
            const used = k.endsWith('usd') ? formatUsd(spent.cost_usd) : `${spent.tokens}`;
            return `${k} ${used} of ${k.endsWith('usd') ? formatUsd(v as number) : v}`;
          });
        lines.push(`budget ${b.project_id}: ${parts.join(', ')}`);
      }
      return lines.join('\n');
    });
  });

  const config = new Command('config').description('the configuration');
  config.addCommand(
    withCommonOptions(
      new Command('show')
        .description("the daemon's effective configuration (defaults, COMBINE_HOME/config.json, then environment) in config.json's own keys")
        .addHelpText(
          'after',
          [
            '',
            'The output is valid config.json: `combine config show > config.json` keeps the effective settings.',
            'With --json: the resolved settings, and the same under "file" in config.json form. Every key is in the README.',
            '',
            'Examples:',
            '  combine config show',
            '  combine config show --json',
          ].join('\n'),
        ),
    ).action(async (opts: CommonOptions) => {
      const c = await withDaemon(getHome(), opts, ({ client }, signal) => client.config.show.query(undefined, { signal }));
      await print(opts, c, () => JSON.stringify(c.file, null, 2));
      if (!opts.json) process.stderr.write(`# ${c.home}/config.json shape; OPENAI_API_KEY (environment only): ${c.provider.api_key}\n`);
    }),
  );
  return [usage, config];
}
