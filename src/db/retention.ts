/**
 * Retention (`combine prune`): the statements that find closed threads old enough to remove and remove
 * them with their work items, mutations, telemetry and ledger entries. Ledger entries go only through
 * `insertLedgerCheckpoint` + `deleteCheckpointedLedgerRun`: the database refuses any other DELETE.
 */
import type { Db } from './connection.js';
import type { LedgerCheckpointRow } from './schema.js';
import { prepared } from './statements.js';

/**
 * Roots (threads without a parent) whose whole tree may go: every thread in it closed before `cutoff`,
 * every work item in it ended, no schedule run still pending on it, and none of them the newest
 * `complete` thread of its semantic request.
 * That newest completion is kept on purpose: it is what makes a repeated request a no-op instead of a
 * second paid run, and it explains the document's current content.
 */
export function listPrunableRoots(db: Db, cutoff: number, limit: number): string[] {
  return (
    prepared(
      db,
      `SELECT r.id FROM llm_threads r
       WHERE r.parent_thread_id IS NULL
         AND r.status IN ('complete', 'failed', 'canceled') AND r.closed_at < @cutoff
         AND NOT EXISTS (
           SELECT 1 FROM llm_threads t
           WHERE (t.id = r.id OR t.parent_thread_id = r.id)
             AND (
               t.status NOT IN ('complete', 'failed', 'canceled') OR t.closed_at >= @cutoff
               OR EXISTS (SELECT 1 FROM llm_work_items w
                          WHERE w.thread_id = t.id AND w.status NOT IN ('applied', 'failed', 'dead_letter'))
               OR EXISTS (SELECT 1 FROM schedule_runs sr WHERE sr.thread_id = t.id AND sr.status = 'pending')
               OR (t.status = 'complete' AND NOT EXISTS (
                     SELECT 1 FROM llm_threads n
                     WHERE n.idempotency_key = t.idempotency_key AND n.status = 'complete' AND n.id <> t.id
                       AND (n.created_at > t.created_at OR (n.created_at = t.created_at AND n.rowid > t.rowid))))))
       ORDER BY r.closed_at
       LIMIT @limit`,
    ).all({ cutoff, limit }) as { id: string }[]
  ).map((r) => r.id);
}

export function listChildThreadIds(db: Db, parentId: string): string[] {
  return (prepared(db, 'SELECT id FROM llm_threads WHERE parent_thread_id = ?').all(parentId) as { id: string }[]).map((r) => r.id);
}

export interface LedgerLink {
  seq: number;
  prev_hash: string;
  hash: string;
}

export function listLedgerLinksForThread(db: Db, threadId: string): LedgerLink[] {
  return prepared(db, 'SELECT seq, prev_hash, hash FROM llm_ledger_entries WHERE thread_id = ? ORDER BY seq').all(threadId) as LedgerLink[];
}

/** Records a run about to be removed; the insert trigger checks it against the entries. */
export function insertLedgerCheckpoint(db: Db, row: LedgerCheckpointRow): void {
  prepared(
    db,
    `INSERT INTO llm_ledger_checkpoints (from_seq, to_seq, hash_before, hash_after, prune_id, cutoff_at, created_at)
     VALUES (@from_seq, @to_seq, @hash_before, @hash_after, @prune_id, @cutoff_at, @created_at)`,
  ).run(row);
}

/** Deletes the entries of a run a checkpoint covers (the delete trigger refuses any other). */
export function deleteCheckpointedLedgerRun(db: Db, fromSeq: number, toSeq: number): number {
  return prepared(db, 'DELETE FROM llm_ledger_entries WHERE seq BETWEEN ? AND ?').run(fromSeq, toSeq).changes;
}

/** Through work_item_id (unique index), not thread_id (no index on it). */
export function deleteMutationsOfThread(db: Db, threadId: string): number {
  return prepared(db, 'DELETE FROM mutations WHERE work_item_id IN (SELECT id FROM llm_work_items WHERE thread_id = ?)').run(threadId).changes;
}

export function deleteCallRecordsOfThread(db: Db, threadId: string): number {
  return prepared(db, 'DELETE FROM llm_call_records WHERE thread_id = ?').run(threadId).changes;
}

/**
 * A thread's charge rows. Budgets do not lose them: they read llm_project_spend, which keeps each
 * project's per-day totals; `combine usage` then reports the history that is still kept.
 */
export function deleteChargesOfThread(db: Db, threadId: string): number {
  return prepared(db, 'DELETE FROM llm_charges WHERE thread_id = ?').run(threadId).changes;
}

/** Provenance of imported entries in a removed run: the entries are gone, so is what they were checked against. */
export function deleteLedgerImportsInRun(db: Db, fromSeq: number, toSeq: number): number {
  return prepared(db, 'DELETE FROM llm_ledger_imports WHERE seq BETWEEN ? AND ?').run(fromSeq, toSeq).changes;
}

/** Finished schedule runs keep their record (period, status, usage) but no longer point at the thread. */
export function detachScheduleRunsFromThread(db: Db, threadId: string): number {
  return prepared(db, "UPDATE schedule_runs SET thread_id = NULL WHERE thread_id = ? AND status <> 'pending'").run(threadId).changes;
}

export function countWorkItemsOfThread(db: Db, threadId: string): number {
  return (prepared(db, 'SELECT count(*) AS n FROM llm_work_items WHERE thread_id = ?').get(threadId) as { n: number }).n;
}

export function deleteWorkItemsOfThread(db: Db, threadId: string): number {
  return prepared(db, 'DELETE FROM llm_work_items WHERE thread_id = ?').run(threadId).changes;
}

/** Deletes a closed thread; the status guard keeps an active thread from ever being removed here. */
export function deleteClosedThread(db: Db, threadId: string): number {
  return prepared(db, "DELETE FROM llm_threads WHERE id = ? AND status IN ('complete', 'failed', 'canceled')").run(threadId).changes;
}

/** Every checkpoint in chain order (for `ledger verify`). */
export function listLedgerCheckpoints(db: Db): LedgerCheckpointRow[] {
  return prepared(db, 'SELECT * FROM llm_ledger_checkpoints ORDER BY from_seq').all() as LedgerCheckpointRow[];
}
