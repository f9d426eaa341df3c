/**
 * `--follow`: streams a thread until it ends — first what already happened, then live events, each
 * ledger entry once (by seq, also across a reconnect). With --json, one JSON object per line and the
 * terminal thread object last; for a person, ledger lines, and for an orchestration a progress bar of
 * its children (on a terminal) or one line per finished child (in a pipe). Ctrl-C leaves the work
 * running, restores the terminal and says how to re-attach (exit 130).
 */
import cliProgress from 'cli-progress';
import type { FollowMessage } from '../daemon/services/follow-stream.js';
import type { ThreadView } from '../daemon/views.js';
import { connectHttp, toCliError } from './client.js';
import { homeFiles } from './home.js';
import { color, describeTargetRef, errColor, plural, printJsonLine, shortId, statusText, truncate } from './output.js';
import { connectWithSubscriptions } from './subscriptions.js';

const TERMINAL = new Set(['complete', 'failed', 'canceled']);
/** 128 + SIGINT, as shells report a command ended by Ctrl-C. */
const EXIT_INTERRUPTED = 130;

function clock(iso?: string): string {
  return (iso ?? new Date().toISOString()).slice(11, 19);
}

/** Children of an orchestration: a bar on a terminal, a line per finished child in a pipe. */
class ChildProgress {
  private bar: cliProgress.SingleBar | null = null;
  private readonly statusOf = new Map<string, string>();

  constructor(private readonly total: number) {
    if (process.stderr.isTTY) {
      this.bar = new cliProgress.SingleBar(
        { format: '  {bar} {value}/{total} children | {complete} complete, {failed} failed', hideCursor: true, clearOnComplete: false, stream: process.stderr },
        cliProgress.Presets.shades_classic,
      );
      this.bar.start(total, 0, { complete: 0, failed: 0 });
    }
  }

  private counts() {
    const c = { complete: 0, failed: 0, canceled: 0 };
    for (const s of this.statusOf.values()) if (TERMINAL.has(s)) c[s as keyof typeof c]++;
    return { ...c, done: c.complete + c.failed + c.canceled };
  }

  /** Counted by each child's latest status, so an event seen twice or late never counts twice. */
  childStatus(threadId: string, label: string, status: string): void {
    const before = this.statusOf.get(threadId);
    this.statusOf.set(threadId, status);
    if (before === status) return;
    const counts = this.counts();
    if (this.bar) this.bar.update(counts.done, counts);
    else if (TERMINAL.has(status)) process.stdout.write(`  ${clock()}  ${label} ${statusText(status)} (${counts.done}/${this.total})\n`);
  }

  /** Stops the bar and shows the cursor again. */
  stop(): void {
    this.bar?.stop();
    this.bar = null;
  }
}

/** After a failed run: which children (or which attempt) failed, with what, and what to do next. */
async function explainFailure(home: string, final: ThreadView): Promise<void> {
  const { client } = connectHttp(homeFiles(home).socket);
  const signal = AbortSignal.timeout(4000);
  const [detail, children] = await Promise.all([
    client.thread.query({ thread_id: final.thread_id }, { signal }),
    client.threadChildren.query({ thread_id: final.thread_id }, { signal }),
  ]);
  const c = color();
  const failed = children.filter((ch) => ch.status === 'failed');
  // One line each: cut to the terminal's width (or 160 columns in a pipe); the ledger has the whole text.
  const width = (process.stdout.isTTY ? process.stdout.columns || 100 : 160) - 4;
  const lines = failed.map(
    (ch) =>
      `  ${c.red('✗')} ${truncate(`${describeTargetRef(ch.target_ref)}  ${shortId(ch.thread_id)}  ${ch.error_code ?? 'failed'}${ch.error_message ? `: ${ch.error_message}` : ''}`, width)}`,
  );
  const last = detail.work_items[detail.work_items.length - 1];
  if (failed.length === 0 && last?.error_code) lines.push(`  ${c.red('✗')} ${truncate(`${last.error_code}: ${last.error_message ?? ''}`, width)}`);
  if (failed.length > 0) lines.unshift(`${plural(failed.length, 'child', 'children')} failed:`);
  lines.push(`next: combine retry ${shortId(final.thread_id)}   (details: combine ledger ${shortId(final.thread_id)})`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** Streams a thread's events until it is terminal and resolves with its final view; `quiet` prints nothing. */
export async function followThread(home: string, threadId: string, opts: { json?: boolean; quiet?: boolean }): Promise<ThreadView> {
  let ended = false;
  const human = !opts.json && !opts.quiet;
  const conn = connectWithSubscriptions(homeFiles(home).socket, () => {
    if (human && !ended) process.stderr.write('  (connection to the daemon lost; reconnecting…)\n');
  });
  // Set by render(); a holder object because TypeScript does not see assignments made in callbacks.
  const ui: { progress: ChildProgress | null } = { progress: null };
  /** Highest ledger seq printed: a re-subscription after a reconnect replays history, printed once only. */
  let lastSeq = 0;
  const onInterrupt = () => {
    ui.progress?.stop();
    process.stderr.write(`\n${errColor().yellow('still running')} — combine thread ${shortId(threadId)} --follow to re-attach\n`);
    process.exit(EXIT_INTERRUPTED);
  };
  process.once('SIGINT', onInterrupt);
  try {
    const final = await new Promise<ThreadView>((resolve, reject) => {
      const sub = conn.client.follow.subscribe(
        { thread_id: threadId },
        {
          onData(msg: FollowMessage) {
            if (msg.event === 'end') {
              ended = true;
              ui.progress?.stop();
              if (opts.json) printJsonLine(msg.thread);
              sub.unsubscribe();
              resolve(msg.thread);
              return;
            }
            if (msg.event === 'ledger') {
              if (msg.seq <= lastSeq) return;
              lastSeq = msg.seq;
            }
            if (opts.quiet) return;
            if (opts.json) return printJsonLine(msg);
            render(msg);
          },
          onError(err) {
            ui.progress?.stop();
            reject(toCliError(err));
          },
        },
      );
    });
    if (human && final.status === 'failed') await explainFailure(home, final).catch(() => {});
    return final;
  } finally {
    process.off('SIGINT', onInterrupt);
    ui.progress?.stop();
    conn.close();
  }

  function render(msg: Exclude<FollowMessage, { event: 'end' }>): void {
    const c = color();
    if (msg.event === 'snapshot') {
      const s = msg.thread.child_summary;
      if (s) ui.progress ??= new ChildProgress(Object.values(s).reduce((a, b) => a + b, 0));
      // With history to show, it says where the thread stands; the status line would come before it.
      else if (!msg.history) process.stdout.write(`  ${clock()}  ${statusText(msg.thread.status)}\n`);
      return;
    }
    if (msg.event === 'thread' && msg.parent_thread_id === threadId) {
      ui.progress?.childStatus(msg.thread_id, describeTargetRef(msg.target_ref), msg.status);
      return;
    }
    if (ui.progress) return;
    const at = 'created_at' in msg && typeof msg.created_at === 'string' ? msg.created_at : undefined;
    if (msg.event === 'ledger') {
      const type = msg.entry_type === 'error' ? c.red(msg.entry_type.padEnd(15)) : msg.entry_type.padEnd(15);
      process.stdout.write(`  ${c.dim(clock(at))}  ${type} ${msg.summary}\n`);
    } else if (msg.event === 'thread') process.stdout.write(`  ${c.dim(clock())}  ${statusText(msg.status)}\n`);
  }
}
