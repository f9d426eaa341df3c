/** `combine usage` (tokens and cost per project and day, with budgets) and `combine config show`. */
import { Command } from 'commander';
import type { UsageView } from '../../daemon/views.js';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { print, table } from '../output.js';

export function formatUsd(n: number): string {
  return `$${n.toFixed(n > 0 && n < 0.01 ? 6 : 4)}`;
}

/** "1234 tok, $0.0123 (2 wasted calls, 1 in doubt)". */
export function describeUsage(u: UsageView): string {
  const extras = [
    u.wasted_calls > 0 ? `${u.wasted_calls} wasted call${u.wasted_calls === 1 ? '' : 's'} (${u.wasted_tokens} tok)` : '',
    u.in_doubt_calls > 0 ? `${u.in_doubt_calls} in doubt (≤${u.in_doubt_tokens} tok)` : '',
  ].filter(Boolean);
  return `${u.calls} call${u.calls === 1 ? '' : 's'}, ${u.total_tokens} tok, ${formatUsd(u.cost_usd)}${extras.length ? ` — ${extras.join(', ')}` : ''}`;
}

export function usageCommands(getHome: () => string): Command[] {
  const usage = withCommonOptions(
    new Command('usage')
      .description('tokens and cost per project and UTC day (wasted and in-doubt calls included), and each budget')
      .option('--project <id>', 'only this project')
      .addHelpText('after', '\nExamples:\n  combine usage\n  combine usage --project acme --json'),
  ).action(async (opts: CommonOptions & { project?: string }) => {
    const u = await withDaemon(getHome(), opts, ({ client }, signal) => client.usage.query({ project_id: opts.project ?? null }, { signal }));
    print(opts, u, () => {
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
                  formatUsd(r.cost_usd),
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
        .description("the daemon's effective configuration: defaults, COMBINE_HOME/config.json, then environment (API key redacted)")
        .addHelpText('after', '\nExamples:\n  combine config show\n  combine config show --json'),
    ).action(async (opts: CommonOptions) => {
      const c = await withDaemon(getHome(), opts, ({ client }, signal) => client.config.show.query(undefined, { signal }));
      print(opts, c, () => JSON.stringify(c, null, 2));
    }),
  );
  return [usage, config];
}
