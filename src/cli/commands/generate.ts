/** `combine generate-epic` and `combine generate-all`. */
import { Command } from 'commander';
import type { CommandView } from '../../daemon/views.js';
import { exitCodeFor, parseDeadline, traceparentOf, withCommonOptions, withTraceparentOption, loadFollow, type CommonOptions } from '../common.js';
import { BULK_CALL_TIMEOUT_MS, withDaemon } from '../daemon-control.js';
import { formatUsd } from '../money.js';
import { EXIT, print, printJsonLine, statusText } from '../output.js';
import { CliError } from '../../core/errors.js';

interface GenerateOptions extends CommonOptions {
  project: string;
  epic?: string;
  force?: boolean;
  follow?: boolean;
  deadline?: string;
  dryRun?: boolean;
  traceparent?: string;
}

export type FollowOptions = Pick<GenerateOptions, 'json' | 'follow'>;

function describeResult(r: CommandView): string {
  if (!r.deduplicated)
    return `thread ${r.thread_id} ${r.status}${r.superseded_thread_id ? ` (superseded ${r.superseded_thread_id}, whose call had not started)` : ''}`;
  if (r.status === 'complete') return `thread ${r.thread_id} already complete: nothing to do (use --force to run it again)`;
  return `thread ${r.thread_id} already ${r.status}: not started twice`;
}

/** A dry run's estimate for a person (`generate-all --dry-run`, `run --dry-run`). */
export function renderDryRun(d: {
  project_id: string;
  model: string;
  calls: number;
  estimated_max_tokens: number;
  max_tokens_per_call: number;
  priced: boolean;
  estimated_max_cost: number | null;
}): string {
  return [
    `dry run for ${d.project_id} (model ${d.model}): nothing was enqueued`,
    `  calls                 ${d.calls} (retries and repairs not included)`,
    `  estimated max tokens  ${d.estimated_max_tokens} (prompt estimate + max_tokens ${d.max_tokens_per_call} per call)`,
    `  estimated max cost    ${d.estimated_max_cost !== null ? formatUsd(d.estimated_max_cost) : `unpriced: no price for ${d.model} in config.json "prices"`}`,
  ].join('\n');
}

/** Prints the command's answer, then follows the thread when asked. Returns the exit code. */
export async function reportAndFollow(home: string, r: CommandView, opts: FollowOptions): Promise<number> {
  if (!opts.follow) {
    await print(opts, r, () => describeResult(r));
    return 0;
  }
  if (opts.json) printJsonLine(r);
  else process.stdout.write(`${describeResult(r)}\n`);
  const final = await (await loadFollow()).followThread(home, r.thread_id, opts);
  if (!opts.json) process.stdout.write(`thread ${final.thread_id} ${statusText(final.status)}\n`);
  return exitCodeFor(final);
}

export function generateCommands(getHome: () => string): Command[] {
  const epic = withCommonOptions(
    withTraceparentOption(new Command('generate-epic'))
      .description('generate the stories of one epic (idempotent: a second request returns the same thread)')
      .requiredOption('--project <id>', 'project id')
      .requiredOption('--epic <id>', 'epic id')
      .option('--force', 'generate again even if a previous run completed; replaces a previous request still queued (SUPERSEDED)')
      .option('--follow', 'stream the thread until it ends (exit 1 if it fails)')
      .option('--deadline <duration>', 'fail with SKIPPED_DEADLINE if not started within this time (e.g. 10m)')
      .addHelpText(
        'after',
        '\nExamples:\n  combine generate-epic --project acme --epic checkout --follow\n  combine generate-epic --project acme --epic checkout --force --json',
      ),
  ).action(async (opts: GenerateOptions) => {
    const home = getHome();
    const deadline_ms = parseDeadline(opts.deadline);
    const traceparent = traceparentOf(opts);
    const r = await withDaemon(home, opts, ({ client }, signal) =>
      client.generate.epic.mutate(
        { project_id: opts.project, epic_id: opts.epic!, force: !!opts.force, deadline_ms, created_by: process.env.USER ?? null, traceparent },
        { signal },
      ),
    );
    process.exitCode = await reportAndFollow(home, r, opts);
  });

  const all = withCommonOptions(
    withTraceparentOption(new Command('generate-all'))
      .description('generate the stories of every epic of a project: one child thread per epic, continuing past failures')
      .requiredOption('--project <id>', 'project id')
      .option('--force', 'generate again even if a previous run completed')
      .option('--follow', 'show a progress bar of the children until all end (exit 1 if any failed)')
      .option('--deadline <duration>', 'fail children not started within this time (e.g. 1h)')
      .option('--dry-run', 'print the calls and the most they can cost ({calls, estimated_max_cost, estimated_max_tokens}); enqueue nothing')
      .addHelpText(
        'after',
        '\nExamples:\n  combine generate-all --project acme --follow\n  combine generate-all --project acme --follow --json\n  combine generate-all --project acme --dry-run',
      ),
  ).action(async (opts: GenerateOptions) => {
    const home = getHome();
    if (opts.dryRun) {
      if (opts.follow) throw new CliError('--dry-run and --follow cannot be combined: a dry run starts nothing', EXIT.USAGE);
      const d = await withDaemon(home, opts, ({ client }, signal) => client.generate.allDryRun.query({ project_id: opts.project }, { signal }));
      await print(opts, d, () => renderDryRun(d));
      return;
    }
    const deadline_ms = parseDeadline(opts.deadline);
    const traceparent = traceparentOf(opts);
    const r = await withDaemon(
      home,
      opts,
      ({ client }, signal) =>
        client.generate.all.mutate(
          { project_id: opts.project, force: !!opts.force, deadline_ms, created_by: process.env.USER ?? null, traceparent },
          { signal },
        ),
      BULK_CALL_TIMEOUT_MS,
    );
    process.exitCode = await reportAndFollow(home, r, opts);
  });
  return [epic, all];
}
