/** `combine briefing <project> [--date D]`: a project's briefing, written by a scheduled `briefing` run. */
import { Command } from 'commander';
import type { BriefingView } from '../../operations/builtin/index.js';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { EXIT, print, shortTime } from '../output.js';
import { CliError } from '../../core/errors.js';

function renderBriefing(b: BriefingView): string {
  const section = (title: string, items: string[]) => (items.length === 0 ? [] : ['', `${title}:`, ...items.map((i) => `  - ${i}`)]);
  return [
    `${b.project_id} — briefing for ${b.date} (v${b.version}, generated ${shortTime(b.generated_at)} UTC)`,
    '',
    b.briefing.summary,
    ...section('Highlights', b.briefing.highlights),
    ...section('Risks', b.briefing.risks),
    ...section('Next steps', b.briefing.next_steps),
  ].join('\n');
}

export function briefingCommand(getHome: () => string): Command {
  return withCommonOptions(
    new Command('briefing')
      .argument('<project-id>')
      .description("show a project's briefing (the newest, or the one for --date); exit 1 while it is still being generated")
      .option('--date <YYYY-MM-DD>', 'the date of the briefing')
      .addHelpText('after', '\nExamples:\n  combine briefing acme\n  combine briefing acme --date 2026-11-23 --json'),
  ).action(async (projectId: string, opts: CommonOptions & { date?: string }) => {
    if (opts.date !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(opts.date)) {
      throw new CliError(`--date: "${opts.date}" is not a date (YYYY-MM-DD)`, EXIT.USAGE);
    }
    const b = await withDaemon(getHome(), opts, ({ client }, signal) => client.briefing.query({ project_id: projectId, date: opts.date ?? null }, { signal }));
    await print(opts, b, () => renderBriefing(b));
  });
}
