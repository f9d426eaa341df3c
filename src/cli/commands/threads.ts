/** `combine threads`, `combine thread <id>`, `combine retry <id>`, `combine cancel <id>`. */
import { Command } from 'commander';
import { parseDurationMs } from '../../domain/duration.js';
import { THREAD_STATUSES } from '../../domain/states.js';
import { distinctShortIds } from '../../domain/short-id.js';
import { describeChildren, describeTarget, exitCodeFor, threadsTable, withCommonOptions, loadFollow, type CommonOptions } from '../common.js';
import type { DaemonClient } from '../client.js';
import { BULK_CALL_TIMEOUT_MS, withDaemon } from '../daemon-control.js';
import { describeUsage } from '../money.js';
import { color, describeTargetRef, EXIT, print, shortId, statusCell, statusText, table, when } from '../output.js';
import { CliError } from '../../core/errors.js';

interface ThreadsOptions extends CommonOptions {
  active?: boolean;
  project?: string;
  limit?: string;
  status?: string[];
  kind?: string;
  parent?: string;
  since?: string;
  cursor?: string;
}

const ID_HELP = 'a thread id: the whole id, the short id shown in tables, or any unique prefix of either';

function positiveInt(name: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new CliError(`${name}: "${value}" is not a positive integer`, EXIT.USAGE);
  return n;
}

function threadsQuery(opts: ThreadsOptions) {
  const statuses = opts.status ?? [];
  const unknown = statuses.filter((s) => !(THREAD_STATUSES as readonly string[]).includes(s));
  if (unknown.length > 0) throw new CliError(`--status: "${unknown.join('", "')}" is not a thread status (${THREAD_STATUSES.join(', ')})`, EXIT.USAGE);
  if (opts.active && statuses.length > 0) throw new CliError('--active is --status open running: give one or the other', EXIT.USAGE);
  let since_ms: number | null = null;
  if (opts.since !== undefined) {
    since_ms = parseDurationMs(opts.since);
    if (since_ms === null || since_ms <= 0) throw new CliError(`--since: "${opts.since}" is not a duration (use e.g. 30m, 2h, 7d)`, EXIT.USAGE);
  }
  return {
    active: !!opts.active,
    project_id: opts.project ?? null,
    limit: positiveInt('--limit', opts.limit),
    status: statuses as (typeof THREAD_STATUSES)[number][],
    kind: opts.kind ?? null,
    parent_thread_id: opts.parent ?? null,
    since_ms,
    cursor: opts.cursor ?? null,
  };
}

type ThreadDetail = Awaited<ReturnType<DaemonClient['thread']['query']>>;
type Children = Awaited<ReturnType<DaemonClient['threadChildren']['query']>>;

function renderThread(t: ThreadDetail, children: Children): string {
  const c = color();
  const lines = [
    `thread ${t.thread_id} ${c.dim(`(${shortId(t.thread_id)})`)}`,
    `  kind      ${t.kind}`,
    `  status    ${statusText(t.status)}${t.child_summary ? ` (children: ${describeChildren(t) || 'none'})` : ''}`,
    `  target    ${describeTarget(t)}`,
    `  usage     ${describeUsage(t.usage)}`,
    ...(t.models.length > 0
      ? [
          `  models    ${t.models.map((m) => `${m.logical_model} (${m.model}): ${m.calls} call${m.calls === 1 ? '' : 's'}, $${m.cost_usd.toFixed(4)}`).join('; ')}`,
        ]
      : []),
    ...(t.escalation
      ? [
          `  escalated to ${t.escalation.logical_model} (${t.escalation.model}): ${t.escalation.calls} call${t.escalation.calls === 1 ? '' : 's'}, $${t.escalation.cost_usd.toFixed(4)}`,
        ]
      : []),
    ...(t.traceparent ? [`  trace     ${t.traceparent.slice(3, 35)}`] : []),
    ...(t.in_doubt ? [`  in doubt  ${t.in_doubt.message}`] : []),
    ...(t.hold
      ? [
          `  waiting   until ${when(t.hold.until)} (${t.hold.reason}${t.hold.error_code ? `, ${t.hold.error_code}` : ''}); \`combine retry ${shortId(t.thread_id)}\` runs it now`,
        ]
      : []),
    ...(t.parent_thread_id ? [`  parent    ${t.parent_thread_id} ${c.dim(`(${shortId(t.parent_thread_id)})`)}`] : []),
    `  created   ${when(t.created_at)}`,
    `  closed    ${when(t.closed_at)}`,
  ];
  if (children.length > 0) {
    const ids = distinctShortIds(children.map((ch) => ch.thread_id));
    lines.push(
      '',
      table([
        ['CHILD', 'TARGET', 'STATUS', 'ERROR'],
        ...children.map((ch) => [
          ids.get(ch.thread_id)!,
          describeTargetRef(ch.target_ref),
          statusCell(ch.status),
          ch.error_code ? `${ch.error_code}: ${ch.error_message ?? ''}` : '',
        ]),
      ]),
    );
  }
  if (t.work_items.length > 0) {
    lines.push(
      '',
      table([
        ['SEQ', 'STATUS', 'ATTEMPT', 'ERROR'],
        ...t.work_items.map((w) => [
          String(w.sequence),
          statusCell(w.status),
          `${w.attempt}/${w.max_attempts}`,
          w.error_code ? `${w.error_code}: ${w.error_message}` : '',
        ]),
      ]),
    );
  }
  if (t.status === 'failed') lines.push('', `next: combine retry ${shortId(t.thread_id)}`);
  return lines.join('\n');
}

export function threadCommands(getHome: () => string): Command[] {
  const threads = withCommonOptions(
    new Command('threads')
      .description('list threads, newest first')
      .option('--active', 'only open and running threads (same as --status open running)')
      .option('--status <status...>', `only these statuses (${THREAD_STATUSES.join(', ')})`)
      .option('--kind <operation>', 'only threads of this operation (see `combine operations`)')
      .option('--project <id>', 'only this project')
      .option('--parent <thread-id>', 'only the children of this orchestration')
      .option('--since <duration>', 'only threads created within this time (e.g. 30m, 2h, 7d)')
      .option('--limit <n>', 'at most this many', '100')
      .option('--cursor <thread-id>', 'the page after this thread (the last id of the previous page)')
      .addHelpText(
        'after',
        [
          '',
          'Examples:',
          '  combine threads --active',
          '  combine threads --status failed canceled --since 1d',
          '  combine threads --parent 9f3c2a1b --json',
          '  combine threads --limit 20 --cursor 7be01c44     # the next page',
        ].join('\n'),
      ),
  ).action(async (opts: ThreadsOptions) => {
    const query = threadsQuery(opts);
    const list = await withDaemon(getHome(), opts, ({ client }, signal) => client.threads.query(query, { signal }));
    await print(opts, list, () => threadsTable(list));
    if (!opts.json && list.length === query.limit) {
      process.stderr.write(`more: add --cursor ${shortId(list[list.length - 1]!.thread_id)} for the next page\n`);
    }
  });

  const thread = withCommonOptions(
    new Command('thread')
      .argument('<thread-id>', ID_HELP)
      .description('show one thread (its work items, and an orchestration its children); --follow streams it until it ends')
      .option('--follow', 'stream what happened and what happens until the thread ends (exit 1 if it fails)')
      .addHelpText('after', '\nExamples:\n  combine thread 9f3c2a1b\n  combine thread 9f3c --follow\n  combine thread 9f3c2a1b --json'),
  ).action(async (threadId: string, opts: CommonOptions & { follow?: boolean }) => {
    const home = getHome();
    const [t, children] = await withDaemon(home, opts, ({ client }, signal) =>
      Promise.all([
        client.thread.query({ thread_id: threadId }, { signal }),
        opts.json || opts.follow ? [] : client.threadChildren.query({ thread_id: threadId }, { signal }),
      ]),
    );
    if (opts.follow) {
      const final = await (await loadFollow()).followThread(home, t.thread_id, opts);
      if (!opts.json) process.stdout.write(`thread ${final.thread_id} ${statusText(final.status)}\n`);
      process.exitCode = exitCodeFor(final);
      return;
    }
    const { work_items, ...view } = t;
    await print(opts, view, () => renderThread(t, children));
  });

  const retry = withCommonOptions(
    new Command('retry')
      .argument('<thread-id>', ID_HELP)
      .description('retry a failed thread with a new work item (a failed generate-all retries its failed children)')
      .addHelpText('after', '\nExample:\n  combine retry 9f3c2a1b && combine thread 9f3c2a1b --follow'),
  ).action(async (threadId: string, opts: CommonOptions) => {
    const t = await withDaemon(getHome(), opts, ({ client }, signal) => client.retry.mutate({ thread_id: threadId }, { signal }));
    await print(opts, t, () => `thread ${t.thread_id} ${statusText(t.status)}: retry queued (follow it: combine thread ${shortId(t.thread_id)} --follow)`);
  });

  const cancel = withCommonOptions(
    new Command('cancel')
      .argument('<thread-id>', ID_HELP)
      .description('cancel a thread: queued work ends, in-flight calls are aborted; a generate-all cancels its children')
      .addHelpText('after', '\nExample:\n  combine cancel 9f3c2a1b'),
  ).action(async (threadId: string, opts: CommonOptions) => {
    const t = await withDaemon(getHome(), opts, ({ client }, signal) => client.cancel.mutate({ thread_id: threadId }, { signal }), BULK_CALL_TIMEOUT_MS);
    await print(opts, t, () => `thread ${t.thread_id} ${statusText(t.status)}`);
  });

  return [threads, thread, retry, cancel];
}
