/**
 * A ledger entry's append inside a writer transaction: entries are buffered and written together at the
 * transaction's end (at its COMMIT on Postgres), each with its `ledger` event, published only if the
 * transaction commits.
 */
import { appendLedgerEntriesAtCommit, type LedgerEntryType, type NewLedgerEntry } from '../../ledger/store.js';
import type { LedgerRow, ThreadRow } from '../../db/schema.js';
import { summarizeLedgerEntry } from '../../ledger/summary.js';
import { traceIdOf } from '../../core/trace-context.js';
import type { EngineEvent } from './events.js';
import type { Tx } from './tx.js';

/**
 * A ledger entry appended at the end of its transaction (`appendEntries`): `row` is there once the
 * transaction's entries are written — at its COMMIT on Postgres — so read it after the write.
 */
export interface PendingEntry {
  readonly row: LedgerRow;
}

class Pending implements PendingEntry {
  written: LedgerRow | undefined;
  get row(): LedgerRow {
    if (!this.written) throw new Error('a ledger entry was read before its transaction appended it');
    return this.written;
  }
}

/** What a transaction will append at its end. */
interface LedgerBuffer {
  entries: NewLedgerEntry[];
  pending: Pending[];
  events: { seq: number }[];
}

/**
 * The payload objects of `response` entries this process appended, by their rows: the answer's step
 * (completer.ts `finishAnswer`) reads its response's payload from here instead of parsing the text it was
 * just written as — a parse of the whole answer per item, which showed in the engine's allocation profile.
 * The object is the one the payload's canonical text was made from, at the end of the same transaction.
 * It stands for that text only while it is read, never changed (no reader does: the body is the provider's
 * parsed answer), and for what it holds, not its key order (its keys are in insertion order, the text's are
 * canonical). On SQLite a row can be noted before a COMMIT that then fails: that row is never read.
 */
const appendedPayloads = new WeakMap<LedgerRow, unknown>();

/** A `response` row's payload as parsed from its text, without a parse when this process appended it. */
export function responsePayloadOf(row: LedgerRow): unknown {
  return appendedPayloads.get(row) ?? JSON.parse(row.payload);
}

/** Per transaction (its statement handle is its own for the closure's lifetime). */
const buffers = new WeakMap<object, LedgerBuffer>();

function bufferOf(tx: Tx): LedgerBuffer {
  let buffer = buffers.get(tx.sql);
  if (!buffer) {
    const created: LedgerBuffer = { entries: [], pending: [], events: [] };
    buffers.set(tx.sql, created);
    tx.atEnd(() => flushLedger(tx, created));
    buffer = created;
  }
  return buffer;
}

/**
 * Writes the transaction's entries, in the order they were appended, in one append at the end of the
 * transaction, on the query that COMMITs it (Postgres: the chain head is then held only for the server's
 * statements and the fsync); the rows and the events' seqs are filled in once committed, before the
 * events are published. A statement that needs an entry's seq finds it itself, behind the append
 * (`atEndAfterAppend`: the response's charge settle).
 */
function flushLedger(tx: Tx, buffer: LedgerBuffer): Promise<void> {
  buffers.delete(tx.sql);
  return appendLedgerEntriesAtCommit(tx.sql, buffer.entries, linkFlushed, buffer);
}

/** Fills in the buffer's pending rows and events' seqs from the rows written, in the entries' order (a module function: docs/design-notes.md "Closures made per call"). */
function linkFlushed(rows: LedgerRow[], buffer: LedgerBuffer): void {
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    buffer.pending[i]!.written = row;
    buffer.events[i]!.seq = row.seq;
    if (row.entry_type === 'response') appendedPayloads.set(row, buffer.entries[i]!.payload);
  }
}

/**
 * Runs `step` at the end of this transaction, after its ledger append (of the entries appended before or
 * after this call) — without needing their rows, so the append still rides on the COMMIT's query, and a
 * statement `step` queues there (`Sql.atCommit`) runs after it: a lock it takes comes after the chain head.
 */
export function atEndAfterAppend(tx: Tx, step: () => Promise<void>): void {
  bufferOf(tx); // registers the append's own end step first
  tx.atEnd(step);
}

export function appendEntry(
  tx: Tx,
  thread: ThreadRow,
  workItemId: string | null,
  entryType: LedgerEntryType,
  attempt: number | null,
  payload: Record<string, unknown>,
): PendingEntry {
  return appendEntries(tx, [{ thread, workItemId, entryType, attempt, payload }])[0]!;
}

/** One ledger entry to append, with the thread it belongs to (for its event). */
export interface EntryOfThread {
  thread: ThreadRow;
  workItemId: string | null;
  entryType: LedgerEntryType;
  attempt: number | null;
  payload: Record<string, unknown>;
}

/**
 * Appends the entries, in order, at the end of this transaction (the same transaction as the change
 * they explain, so they commit or roll back with it). Each one's event is emitted now, so events keep the
 * order of the changes; its `seq` is filled in when the entries are written, before the commit publishes it.
 */
export function appendEntries(tx: Tx, entries: readonly EntryOfThread[]): PendingEntry[] {
  const buffer = bufferOf(tx);
  return entries.map(({ thread, workItemId, entryType, attempt, payload }) => {
    buffer.entries.push({ thread_id: thread.id, work_item_id: workItemId, entry_type: entryType, attempt, payload, created_at: tx.now });
    const event: Extract<EngineEvent, { type: 'ledger' }> = {
      type: 'ledger',
      thread_id: thread.id,
      parent_thread_id: thread.parent_thread_id,
      trace_id: traceIdOf(thread.traceparent),
      work_item_id: workItemId,
      seq: 0,
      entry_type: entryType,
      attempt,
      code: typeof payload.code === 'string' ? payload.code : null,
      next: typeof payload.next === 'string' ? payload.next : null,
      summary: summarizeLedgerEntry(entryType, payload),
    };
    tx.emit(event);
    buffer.events.push(event);
    const pending = new Pending();
    buffer.pending.push(pending);
    return pending;
  });
}
