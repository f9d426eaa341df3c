/** Options every command shares, and the bits of rendering several commands use. */
import type { Command } from 'commander';
import type { ThreadView } from '../daemon/views.js';
import { distinctShortIds } from '../domain/short-id.js';
import { parseDurationMs } from '../domain/duration.js';
import { parseTraceparent } from '../core/trace-context.js';
import { costText } from './money.js';
import { EXIT, statusCell, table, when } from './output.js';
import { CliError } from '../core/errors.js';

export interface CommonOptions {
  json?: boolean;
  autostart?: boolean;
}

/** --json everywhere; --no-autostart on commands that talk to the daemon. */
export function withCommonOptions(cmd: Command, talksToDaemon = true): Command {
  cmd.option('--json', 'print machine-readable JSON');
  if (talksToDaemon) cmd.option('--no-autostart', 'exit 3 instead of starting the daemon when it is not running');
  return cmd;
}

/** `--traceparent`: a command joins the caller's trace (W3C Trace Context). */
export function withTraceparentOption(cmd: Command): Command {
  return cmd.option('--traceparent <value>', 'join this W3C trace (00-<trace id>-<span id>-<flags>); default: $TRACEPARENT, else a new trace');
}

/** The trace context to send: `--traceparent`, else the TRACEPARENT environment variable (a bad one exits 2). */
export function traceparentOf(opts: { traceparent?: string }): string | null {
  const value = opts.traceparent ?? (process.env.TRACEPARENT || undefined);
  if (value === undefined) return null;
  const where = opts.traceparent !== undefined ? '--traceparent' : 'TRACEPARENT';
  if (!parseTraceparent(value))
    throw new CliError(`${where}: "${value}" is not a W3C traceparent (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>)`, EXIT.USAGE);
  return value;
}

export function parseDeadline(value: string | undefined): number | null {
  if (value === undefined) return null;
  const ms = parseDurationMs(value);
  if (ms === null || ms <= 0) throw new CliError(`--deadline: "${value}" is not a duration (use e.g. 90s, 10m, 2h)`, EXIT.USAGE);
  return ms;
}

export function describeTarget(t: ThreadView): string {
  const r = t.target_ref;
  if (r.epic_id) return `${r.project_id}/${String(r.epic_id)}`;
  const key = r.key ?? r.date; // threads written before keys were stored name their briefing's date only
  if (key) return `${r.project_id} ${r.doc_type} ${String(key)}`;
  return r.doc_type === 'story_backlog' ? `${r.project_id} (all epics)` : `${r.project_id} ${r.doc_type}`;
}

export function describeChildren(t: ThreadView): string {
  if (!t.child_summary) return '';
  return Object.entries(t.child_summary)
    .map(([status, n]) => `${n} ${status}`)
    .join(', ');
}

export function threadsTable(threads: ThreadView[]): string {
  if (threads.length === 0) return 'no threads';
  const ids = distinctShortIds(threads.map((t) => t.thread_id));
  return table([
    ['THREAD', 'KIND', 'STATUS', 'TARGET', 'CREATED', 'TOKENS', 'COST', 'CHILDREN'],
    ...threads.map((t) => [
      ids.get(t.thread_id)!,
      t.kind,
      statusCell(t.status),
      describeTarget(t),
      when(t.created_at),
      String(t.usage.total_tokens),
      costText(t.usage),
      describeChildren(t),
    ]),
  ]);
}

/** Exit code for a followed thread: 0 when it completed, 1 otherwise. */
export function exitCodeFor(t: ThreadView): number {
  return t.status === 'complete' ? EXIT.OK : EXIT.FAILED;
}

/** `--follow` (WebSocket client, progress bars) is loaded only when asked for: it is most of the CLI's code. */
export const loadFollow = () => import('./follow.js');
