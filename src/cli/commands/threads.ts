/** `combine threads`, `combine thread <id>`, `combine retry <id>`, `combine cancel <id>`. */
import { Command } from 'commander';
import { describeChildren, describeTarget, exitCodeFor, threadsTable, withCommonOptions, loadFollow, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { EXIT, print, shortTime, table } from '../output.js';
import { describeUsage } from './usage.js';
import { CliError } from '../../core/errors.js';

interface ThreadsOptions extends CommonOptions {
  active?: boolean;
  project?: string;
  limit?: string;
}

export function threadCommands(getHome: () => string): Command[] {
  const threads = withCommonOptions(
    new Command('threads')
      .description('list threads, newest first')
      .option('--active', 'only open and running threads')
      .option('--project <id>', 'only this project')
      .option('--limit <n>', 'at most this many', '100')
      .addHelpText('after', '\nExamples:\n  combine threads --active\n  combine threads --project acme --json'),
  ).action(async (opts: ThreadsOptions) => {
    const limit = Number(opts.limit);
    if (!Number.isInteger(limit) || limit < 1) throw new CliError(`--limit: "${opts.limit}" is not a positive integer`, EXIT.USAGE);
    const list = await withDaemon(getHome(), opts, ({ client }, signal) =>
      client.threads.query({ active: !!opts.active, project_id: opts.project ?? null, limit }, { signal }),
    );
    print(opts, list, () => threadsTable(list));
  });

  const thread = withCommonOptions(
    new Command('thread')
      .argument('<thread-id>')
      .description('show one thread (and its work items); --follow streams it until it ends')
      .option('--follow', 'stream events until the thread ends (exit 1 if it fails)'),
  ).action(async (threadId: string, opts: CommonOptions & { follow?: boolean }) => {
    const home = getHome();
    const t = await withDaemon(home, opts, ({ client }, signal) => client.thread.query({ thread_id: threadId }, { signal }));
    if (opts.follow) {
      const final = await (await loadFollow()).followThread(home, t.thread_id, opts);
      if (!opts.json) process.stdout.write(`thread ${final.thread_id} ${final.status}\n`);
      process.exitCode = exitCodeFor(final);
      return;
    }
    const { work_items, ...view } = t;
    print(opts, view, () =>
      [
        `thread ${t.thread_id}`,
        `  kind      ${t.kind}`,
        `  status    ${t.status}${t.child_summary ? ` (children: ${describeChildren(t) || 'none'})` : ''}`,
        `  target    ${describeTarget(t)}`,
        `  usage     ${describeUsage(t.usage)}`,
        ...(t.in_doubt ? [`  in doubt  ${t.in_doubt.message}`] : []),
        ...(t.hold ? [`  waiting   until ${shortTime(t.hold.until)} (${t.hold.reason}${t.hold.error_code ? `, ${t.hold.error_code}` : ''}); \`combine retry ${t.thread_id}\` runs it now`] : []),
        ...(t.parent_thread_id ? [`  parent    ${t.parent_thread_id}`] : []),
        `  created   ${shortTime(t.created_at)}`,
        `  closed    ${shortTime(t.closed_at)}`,
        ...(work_items.length > 0
          ? [
              '',
              table([
                ['SEQ', 'STATUS', 'ATTEMPT', 'ERROR'],
                ...work_items.map((w) => [String(w.sequence), w.status, `${w.attempt}/${w.max_attempts}`, w.error_code ? `${w.error_code}: ${w.error_message}` : '']),
              ]),
            ]
          : []),
      ].join('\n'),
    );
  });

  const retry = withCommonOptions(
    new Command('retry').argument('<thread-id>').description('retry a failed thread with a new work item (a failed generate-all retries its failed children)'),
  ).action(async (threadId: string, opts: CommonOptions) => {
    const t = await withDaemon(getHome(), opts, ({ client }, signal) => client.retry.mutate({ thread_id: threadId }, { signal }));
    print(opts, t, () => `thread ${t.thread_id} ${t.status}: retry queued`);
  });

  const cancel = withCommonOptions(
    new Command('cancel').argument('<thread-id>').description('cancel a thread: queued work ends, in-flight calls are aborted; a generate-all cancels its children'),
  ).action(async (threadId: string, opts: CommonOptions) => {
    const t = await withDaemon(getHome(), opts, ({ client }, signal) => client.cancel.mutate({ thread_id: threadId }, { signal }));
    print(opts, t, () => `thread ${t.thread_id} ${t.status}`);
  });

  return [threads, thread, retry, cancel];
}
