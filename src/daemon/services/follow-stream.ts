/**
 * `--follow` on the daemon's side: what already happened, then what happens, with no gap and no
 * duplicate. The subscription starts first; then the snapshot — the thread, its children's states and
 * the ledger entries of the thread and its children — is read in the same synchronous step, so every
 * event published later is newer than the snapshot. Ledger events are still de-duplicated by seq, and
 * thread events by status, so a client that re-subscribes after a reconnect can count on both.
 */
import type { Sql } from '../../core/sql.js';
import type { LedgerRow, ThreadRow } from '../../db/schema.js';
import { getThread, listChildThreads } from '../../db/threads.js';
import type { TargetRef } from '../../domain/operations.js';
import { isTerminalThread } from '../../domain/states.js';
import { listLedgerForThreadFamily, listLedgerForThreadFamilyAfter } from '../../ledger/store.js';
import { summarizeLedgerEntry } from '../../ledger/summary.js';
import type { EngineEvent, EventBus } from '../engine/events.js';
import type { RemoteChanges } from '../runtime/cluster-changes.js';
import { traceIdOf } from '../../core/trace-context.js';
import { threadView, type ThreadView } from '../views.js';
import { CommandError } from '../../core/errors.js';

/** An engine event as streamed to a follower: its `type` renamed to `event`. */
type EventMessage = EngineEvent extends infer E ? (E extends { type: infer T } ? Omit<E, 'type'> & { event: T } : never) : never;

/**
 * One line of a follow stream: the snapshot first, then events — those that happened before the
 * follower attached carry `history: true` (and ledger ones their `created_at`) — and `end` with the
 * terminal thread last.
 */
export type FollowMessage =
  | (EventMessage & { history?: true; created_at?: string })
  /** `history`: how many history messages follow the snapshot. */
  | { event: 'snapshot'; thread: ThreadView; history: number }
  | { event: 'end'; thread: ThreadView };

function threadMessage(t: ThreadRow): FollowMessage {
  return {
    event: 'thread',
    thread_id: t.id,
    parent_thread_id: t.parent_thread_id,
    status: t.status,
    kind: t.kind,
    target_ref: JSON.parse(t.target_ref) as TargetRef,
    trace_id: traceIdOf(t.traceparent),
    history: true,
  };
}

function ledgerMessage(e: LedgerRow, parentOf: (threadId: string) => string | null, traceOf: (threadId: string) => string | null): FollowMessage {
  const payload = JSON.parse(e.payload) as Record<string, unknown>;
  return {
    event: 'ledger',
    thread_id: e.thread_id,
    parent_thread_id: parentOf(e.thread_id),
    trace_id: traceOf(e.thread_id),
    work_item_id: e.work_item_id,
    seq: e.seq,
    entry_type: e.entry_type,
    attempt: e.attempt,
    code: typeof payload.code === 'string' ? payload.code : null,
    next: typeof payload.next === 'string' ? payload.next : null,
    summary: summarizeLedgerEntry(e.entry_type, payload),
    history: true,
    created_at: new Date(e.created_at).toISOString(),
  };
}

/**
 * Streams a thread's history, then its events and its children's, until it ends. With `remote` (several
 * daemons on one database), another daemon's change to the thread or a child makes the stream re-read
 * what it has not seen: ledger entries after the last seq a re-read saw (appends hold the chain head to
 * their commit, so seqs commit in order: every earlier entry was visible to that read), and statuses.
 */
export async function* followThread(
  sql: Sql,
  bus: EventBus,
  threadId: string,
  signal: AbortSignal | undefined,
  remote?: RemoteChanges,
): AsyncGenerator<FollowMessage> {
  const queue: EngineEvent[] = [];
  let wakeUp: (() => void) | null = null;
  let changedElsewhere = false;
  /** Threads with a local event published while a re-read was being read (null: no re-read running). */
  let publishedDuringReread: Set<string> | null = null;
  const unsubscribe = bus.subscribe((e) => {
    if (e.thread_id !== threadId && e.parent_thread_id !== threadId) return;
    queue.push(e);
    if (e.type === 'thread') publishedDuringReread?.add(e.thread_id);
    wakeUp?.();
  });
  // Before the snapshot is read: another daemon's change committed after it is notified here.
  const unsubscribeRemote = await remote?.subscribe((c) => {
    if (c.threadId !== '*' && c.threadId !== threadId && c.parentThreadId !== threadId) return;
    changedElsewhere = true;
    wakeUp?.();
  });
  const onAbort = () => wakeUp?.();
  signal?.addEventListener('abort', onAbort);
  try {
    // The snapshot: read (at the last commit) after subscribing and before anything is yielded; events
    // published meanwhile wait in the queue, and ledger entries already in the snapshot are skipped by seq.
    const initial = await getThread(sql, threadId);
    if (!initial) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
    const children = await listChildThreads(sql, threadId);
    const parentOf = (id: string) => (id === threadId ? initial.parent_thread_id : threadId);
    const traces = new Map([initial, ...children].map((t) => [t.id, traceIdOf(t.traceparent)]));
    const traceOf = (id: string) => traces.get(id) ?? null;
    const history = [...children.map(threadMessage), ...(await listLedgerForThreadFamily(sql, threadId)).map((e) => ledgerMessage(e, parentOf, traceOf))];
    const snapshot = await threadView(sql, initial);

    let lastSeq = 0;
    /** Seqs yielded (remote re-reads may find entries older than the newest a local event yielded). */
    const seen = new Set<number>();
    /** Every family entry at or below this seq has been read (by the snapshot or a re-read). */
    let readThrough = 0;
    const statusOf = new Map<string, string>([[threadId, initial.status], ...children.map((c) => [c.id, c.status] as const)]);
    const fresh = (e: EngineEvent): boolean => {
      if (e.type === 'ledger') {
        if (e.seq <= lastSeq || seen.has(e.seq)) return false;
        seen.add(e.seq);
        if (!remote) lastSeq = e.seq;
      } else if (e.type === 'thread') {
        if (statusOf.get(e.thread_id) === e.status) return false;
        statusOf.set(e.thread_id, e.status);
      }
      return true;
    };

    yield { event: 'snapshot', thread: snapshot, history: history.length };
    for (const m of history) {
      if (m.event === 'ledger') lastSeq = Math.max(lastSeq, m.seq);
      yield m;
    }
    readThrough = lastSeq;
    if (isTerminalThread(initial.status)) {
      yield { event: 'end', thread: snapshot };
      return;
    }
    while (!signal?.aborted) {
      if (queue.length === 0 && !changedElsewhere) await new Promise<void>((r) => (wakeUp = r));
      wakeUp = null;
      if (changedElsewhere) {
        changedElsewhere = false;
        publishedDuringReread = new Set();
        const reread = await readChangesSince(sql, threadId, readThrough, parentOf, traceOf);
        const racing = publishedDuringReread;
        publishedDuringReread = null;
        readThrough = reread.readThrough;
        // A status the re-read found for a thread whose local event was published while it read may be
        // older than that event (read before its commit), and queued after it would step the thread back
        // (complete, running, complete: a child shown finished twice). Those threads are read once more,
        // after the event: the next re-read sees their status at least as new.
        const current = reread.events.filter((e) => e.type !== 'thread' || !racing.has(e.thread_id));
        if (current.length < reread.events.length) changedElsewhere = true;
        queue.push(...current);
      }
      for (const e of queue.splice(0)) {
        if (!fresh(e)) continue;
        const { type, ...rest } = e;
        yield { event: type, ...rest } as FollowMessage;
        if (e.type === 'thread' && e.thread_id === threadId && isTerminalThread(e.status)) {
          yield { event: 'end', thread: await threadView(sql, (await getThread(sql, threadId))!) };
          return;
        }
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    unsubscribe();
    unsubscribeRemote?.();
  }
}

/**
 * What another daemon may have changed, as events: the family's ledger entries after `afterSeq` and the
 * current status of the thread and its children (the stream drops statuses and seqs it already showed).
 */
async function readChangesSince(
  sql: Sql,
  threadId: string,
  afterSeq: number,
  parentOf: (threadId: string) => string | null,
  traceOf: (threadId: string) => string | null,
): Promise<{ events: EngineEvent[]; readThrough: number }> {
  const thread = await getThread(sql, threadId);
  const children = await listChildThreads(sql, threadId);
  const entries = await listLedgerForThreadFamilyAfter(sql, threadId, afterSeq);
  const events: EngineEvent[] = [];
  for (const e of entries) {
    const { event: _, history: __, created_at: ___, ...rest } = ledgerMessage(e, parentOf, traceOf) as Extract<FollowMessage, { event: 'ledger' }>;
    events.push({ type: 'ledger', ...rest });
  }
  // Children first and the thread last: its terminal status ends the stream after everything else.
  for (const t of [...children, ...(thread ? [thread] : [])]) {
    const { event: _, history: __, ...rest } = threadMessage(t) as Extract<FollowMessage, { event: 'thread' }>;
    events.push({ type: 'thread', ...rest });
  }
  return { events, readThrough: entries.length > 0 ? entries[entries.length - 1]!.seq : afterSeq };
}
