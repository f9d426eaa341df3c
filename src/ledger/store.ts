/**
 * llm_ledger_entries: the append-only, hash-chained execution record. `appendLedgerEntry` is the only
 * way entries are written; triggers refuse UPDATE and DELETE in the database itself.
 */
import { GENESIS_HASH, ledgerEntryHash } from './chain.js';
import type { Db } from '../db/connection.js';
import type { LedgerRow } from '../db/schema.js';
import { prepared } from '../db/statements.js';
import { canonicalJson } from '../domain/canonical-json.js';

export const LEDGER_ENTRY_TYPES = ['prompt', 'response', 'parse_report', 'mutation_report', 'error'] as const;
export type LedgerEntryType = (typeof LEDGER_ENTRY_TYPES)[number];

export interface NewLedgerEntry {
  thread_id: string;
  work_item_id: string | null;
  entry_type: LedgerEntryType;
  attempt: number | null;
  payload: unknown;
  created_at: number;
}

/**
 * The chain's last link, or null for an empty ledger. When `combine prune` removed the newest entries,
 * the head is the last checkpoint's hash: seqs are never reused and the chain continues across the cut.
 */
export function getLedgerHead(db: Db): { seq: number; hash: string } | null {
  const row = prepared(
    db,
    `SELECT seq, hash FROM (
       SELECT * FROM (SELECT seq, hash FROM llm_ledger_entries ORDER BY seq DESC LIMIT 1)
       UNION ALL
       SELECT * FROM (SELECT to_seq AS seq, hash_after AS hash FROM llm_ledger_checkpoints ORDER BY from_seq DESC LIMIT 1))
     ORDER BY seq DESC LIMIT 1`,
  ).get() as { seq: number; hash: string } | undefined;
  return row ?? null;
}

/**
 * Appends one entry at the head of the chain. The head is read inside the caller's transaction (the
 * writer is the only writer), so links can neither fork nor skip.
 */
export function appendLedgerEntry(db: Db, e: NewLedgerEntry): LedgerRow {
  const head = getLedgerHead(db);
  const row: Omit<LedgerRow, 'hash'> = {
    seq: (head?.seq ?? 0) + 1,
    thread_id: e.thread_id,
    work_item_id: e.work_item_id,
    entry_type: e.entry_type,
    attempt: e.attempt,
    payload: canonicalJson(e.payload),
    prev_hash: head?.hash ?? GENESIS_HASH,
    created_at: e.created_at,
  };
  const full: LedgerRow = { ...row, hash: ledgerEntryHash(row) };
  prepared(
    db,
    `INSERT INTO llm_ledger_entries (seq, thread_id, work_item_id, entry_type, attempt, payload, prev_hash, hash, created_at)
     VALUES (@seq, @thread_id, @work_item_id, @entry_type, @attempt, @payload, @prev_hash, @hash, @created_at)`,
  ).run(full);
  return full;
}

export function getLedgerEntry(db: Db, seq: number): LedgerRow | undefined {
  return prepared(db, 'SELECT * FROM llm_ledger_entries WHERE seq = ?').get(seq) as LedgerRow | undefined;
}

export function listLedgerForThread(db: Db, threadId: string): LedgerRow[] {
  return prepared(db, 'SELECT * FROM llm_ledger_entries WHERE thread_id = ? ORDER BY seq').all(threadId) as LedgerRow[];
}

/** A thread's entries and its children's (an orchestration's whole record), in chain order; at most `limit`. */
export function listLedgerForThreadFamily(db: Db, threadId: string, limit = -1): LedgerRow[] {
  return prepared(
    db,
    `SELECT * FROM llm_ledger_entries
     WHERE thread_id IN (SELECT @id UNION ALL SELECT id FROM llm_threads WHERE parent_thread_id = @id)
     ORDER BY seq LIMIT @limit`,
  ).all({ id: threadId, limit }) as LedgerRow[];
}

/** The work item's most recent entry: tells recovery how far an interrupted item got. */
export function getLastLedgerEntryForWorkItem(db: Db, workItemId: string): LedgerRow | undefined {
  return prepared(db, 'SELECT * FROM llm_ledger_entries WHERE work_item_id = ? ORDER BY seq DESC LIMIT 1').get(workItemId) as LedgerRow | undefined;
}

/** The work item's most recent entry of one type. */
export function getLastLedgerEntryOfType(db: Db, workItemId: string, type: LedgerEntryType): LedgerRow | undefined {
  return prepared(db, 'SELECT * FROM llm_ledger_entries WHERE work_item_id = ? AND entry_type = ? ORDER BY seq DESC LIMIT 1').get(workItemId, type) as
    | LedgerRow
    | undefined;
}

/** Every entry in chain order, streamed (the ledger can be large). */
export function iterateLedger(db: Db): IterableIterator<LedgerRow> {
  return prepared(db, 'SELECT * FROM llm_ledger_entries ORDER BY seq').iterate() as IterableIterator<LedgerRow>;
}

export function countLedgerEntries(db: Db): number {
  return (prepared(db, 'SELECT count(*) AS n FROM llm_ledger_entries').get() as { n: number }).n;
}

/** Applied work items with no mutation_report entry: a hole in the record of what was changed. */
export function listAppliedWithoutMutationReport(db: Db): string[] {
  return (
    prepared(
      db,
      `SELECT w.id FROM llm_work_items w
       WHERE w.status = 'applied' AND NOT EXISTS (
         SELECT 1 FROM llm_ledger_entries l WHERE l.work_item_id = w.id AND l.entry_type = 'mutation_report')`,
    ).all() as { id: string }[]
  ).map((r) => r.id);
}

/** Complete threads that have work items but no applied one: a completion the ledger cannot explain. */
export function listCompleteThreadsWithoutAppliedItem(db: Db): string[] {
  return (
    prepared(
      db,
      `SELECT t.id FROM llm_threads t
       WHERE t.status = 'complete'
         AND EXISTS (SELECT 1 FROM llm_work_items w WHERE w.thread_id = t.id)
         AND NOT EXISTS (SELECT 1 FROM llm_work_items w WHERE w.thread_id = t.id AND w.status = 'applied')`,
    ).all() as { id: string }[]
  ).map((r) => r.id);
}

export function getLatestLedgerEntrySeqForThread(db: Db, threadId: string): number | null {
  const row = prepared(db, 'SELECT max(seq) AS seq FROM llm_ledger_entries WHERE thread_id = ?').get(threadId) as { seq: number | null };
  return row.seq;
}
