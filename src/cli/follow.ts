/**
 * `--follow`: streams a thread's events until it ends. With --json, one JSON object per line and the
 * terminal thread object last; for a person, ledger lines as they happen, and for an orchestration a
 * progress bar of its children (on a terminal) or one line per finished child (in a pipe).
 */
import cliProgress from 'cli-progress';
import type { FollowMessage } from '../daemon/services/follow-stream.js';
import type { ThreadView } from '../daemon/views.js';
import { toCliError } from './client.js';
import { connectWithSubscriptions } from './subscriptions.js';
import { homeFiles } from './home.js';
import { printJsonLine, shortId } from './output.js';

const TERMINAL = new Set(['complete', 'failed', 'canceled']);

function time(): string {
  return new Date().toISOString().slice(11, 19);
}

class ChildProgress {
  private bar: cliProgress.SingleBar | null = null;
  private readonly statusOf = new Map<string, string>();
  private counts = { complete: 0, failed: 0, canceled: 0 };

  constructor(
    private total: number,
    initial: Record<string, number>,
  ) {
    this.counts = { complete: initial.complete ?? 0, failed: initial.failed ?? 0, canceled: initial.canceled ?? 0 };
    if (process.stderr.isTTY) {
      this.bar = new cliProgress.SingleBar(
        { format: '  {bar} {value}/{total} epics | {complete} complete, {failed} failed', hideCursor: true, clearOnComplete: false },
        cliProgress.Presets.shades_classic,
      );
      this.bar.start(total, this.done(), this.counts);
    }
  }

  private done(): number {
    return this.counts.complete + this.counts.failed + this.counts.canceled;
  }

  childStatus(threadId: string, label: string, status: string): void {
    const before = this.statusOf.get(threadId);
    this.statusOf.set(threadId, status);
    if (!TERMINAL.has(status) || before === status) return;
    this.counts[status as keyof typeof this.counts]++;
    if (this.bar) this.bar.update(this.done(), this.counts);
    else process.stdout.write(`  ${time()}  ${label} ${status} (${this.done()}/${this.total})\n`);
  }

  stop(): void {
    this.bar?.stop();
  }
}

/** Streams a thread's events until it is terminal and resolves with its final view; `quiet` prints nothing. */
export function followThread(home: string, threadId: string, opts: { json?: boolean; quiet?: boolean }): Promise<ThreadView> {
  let ended = false;
  const conn = connectWithSubscriptions(homeFiles(home).socket, () => {
    if (!opts.json && !opts.quiet && !ended) process.stderr.write('  (connection to the daemon lost; reconnecting…)\n');
  });
  let progress: ChildProgress | null = null;
  return new Promise<ThreadView>((resolve, reject) => {
    const sub = conn.client.follow.subscribe(
      { thread_id: threadId },
      {
        onData(msg: FollowMessage) {
          if (msg.event === 'end') {
            ended = true;
            progress?.stop();
            if (opts.json) printJsonLine(msg.thread);
            sub.unsubscribe();
            resolve(msg.thread);
            return;
          }
          if (opts.quiet) return;
          if (opts.json) return printJsonLine(msg);
          if (msg.event === 'snapshot') {
            const s = msg.thread.child_summary;
            if (s) progress = new ChildProgress(Object.values(s).reduce((a, b) => a + b, 0), s);
            else process.stdout.write(`  ${time()}  ${msg.thread.status}\n`);
            return;
          }
          if (msg.event === 'thread' && msg.parent_thread_id === threadId) {
            const label = msg.target_ref.epic_id ? `epic ${msg.target_ref.epic_id}` : `thread ${shortId(msg.thread_id)}`;
            return progress?.childStatus(msg.thread_id, label, msg.status);
          }
          if (progress) return;
          if (msg.event === 'ledger') process.stdout.write(`  ${time()}  ${msg.entry_type.padEnd(15)} ${msg.summary}\n`);
          else if (msg.event === 'thread') process.stdout.write(`  ${time()}  ${msg.status}\n`);
        },
        onError(err) {
          progress?.stop();
          reject(toCliError(err));
        },
      },
    );
  }).finally(() => conn.close());
}
