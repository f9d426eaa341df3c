/**
 * Retention (`combine prune`): the statements that find closed threads old enough to remove and remove
 * them with their work items, mutations, telemetry and ledger entries. Ledger entries go only through
 * `insertLedgerCheckpoint` + `deleteCheckpointedLedgerRun`: the database refuses any other DELETE.
 */
import type { Sql } from '../core/sql.js';
import { insertionOrder } from './dialect.js';
import type { LedgerCheckpointRow } from './schema.js';

/**
 * Roots (threads without a parent) whose whole tree may go: every thread in it closed before `cutoff`,
 * every work item in it ended, no schedule run still pending on it, and none of them the newest
 * `complete` thread of its semantic request.
 * That newest completion is kept on purpose: it is what makes a repeated request a no-op instead of a
 * second paid run, and it explains the document's current content.
 */
export async function listPrunableRoots(sql: Sql, cutoff: number, limit: number): Promise<string[]> {
  return (
    (await sql.all(
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
                       AND (n.created_at > t.created_at OR (n.created_at = t.created_at AND ${insertionOrder(sql.dialect, 'n.')} > ${insertionOrder(sql.dialect, 't.')}))))))
       ORDER BY r.closed_at
       LIMIT @limit`,
      { cutoff, limit },
    )) as { id: string }[]
  ).map((r) => r.id);
}

export async function listChildThreadIds(sql: Sql, parentId: string): Promise<string[]> {
  return ((await sql.all('SELECT id FROM llm_threads WHERE parent_thread_id = ?', [parentId])) as { id: string }[]).map((r) => r.id);
}

export interface LedgerLink {
  seq: number;
  prev_hash: string;
  hash: string;
}

export async function listLedgerLinksForThread(sql: Sql, threadId: string): Promise<LedgerLink[]> {
  return (await sql.all('SELECT seq, prev_hash, hash FROM llm_ledger_entries WHERE thread_id = ? ORDER BY seq', [threadId])) as LedgerLink[];
}

/** Records a run about to be removed; the insert trigger checks it against the entries. */
export async function insertLedgerCheckpoint(sql: Sql, row: LedgerCheckpointRow): Promise<void> {
  await sql.run(
    `INSERT INTO llm_ledger_checkpoints (from_seq, to_seq, hash_before, hash_after, prune_id, cutoff_at, created_at)
     VALUES (@from_seq, @to_seq, @hash_before, @hash_after, @prune_id, @cutoff_at, @created_at)`,
    row,
  );
}

/** Deletes the entries of a run a checkpoint covers (the delete trigger refuses any other). */
export async function deleteCheckpointedLedgerRun(sql: Sql, fromSeq: number, toSeq: number): Promise<number> {
  return (await sql.run('DELETE FROM llm_ledger_entries WHERE seq BETWEEN ? AND ?', [fromSeq, toSeq])).changes;
}

/** Through work_item_id (unique index), not thread_id (no index on it). */
export async function deleteMutationsOfThread(sql: Sql, threadId: string): Promise<number> {
  return (await sql.run('DELETE FROM mutations WHERE work_item_id IN (SELECT id FROM llm_work_items WHERE thread_id = ?)', [threadId])).changes;
}

/**
 * A thread's charge rows. Budgets do not lose them: they read llm_project_spend, which keeps each
 * project's per-day totals; `combine usage` then reports the history that is still kept.
 */
export async function deleteChargesOfThread(sql: Sql, threadId: string): Promise<number> {
  return (await sql.run('DELETE FROM llm_charges WHERE thread_id = ?', [threadId])).changes;
}

/** Provenance of imported entries in a removed run: the entries are gone, so is what they were checked against. */
export async function deleteLedgerImportsInRun(sql: Sql, fromSeq: number, toSeq: number): Promise<number> {
  return (await sql.run('DELETE FROM llm_ledger_imports WHERE seq BETWEEN ? AND ?', [fromSeq, toSeq])).changes;
}

/** Finished schedule runs keep their record (period, status, usage) but no longer point at the thread. */
export async function detachScheduleRunsFromThread(sql: Sql, threadId: string): Promise<number> {
  return (await sql.run("UPDATE schedule_runs SET thread_id = NULL WHERE thread_id = ? AND status <> 'pending'", [threadId])).changes;
}

export async function countWorkItemsOfThread(sql: Sql, threadId: string): Promise<number> {
  return ((await sql.get('SELECT count(*) AS n FROM llm_work_items WHERE thread_id = ?', [threadId])) as { n: number }).n;
}

export async function deleteWorkItemsOfThread(sql: Sql, threadId: string): Promise<number> {
  return (await sql.run('DELETE FROM llm_work_items WHERE thread_id = ?', [threadId])).changes;
}

/** Deletes a closed thread; the status guard keeps an active thread from ever being removed here. */
export async function deleteClosedThread(sql: Sql, threadId: string): Promise<number> {
  return (await sql.run("DELETE FROM llm_threads WHERE id = ? AND status IN ('complete', 'failed', 'canceled')", [threadId])).changes;
}

/** Every checkpoint in chain order (for `ledger verify`). */
export async function listLedgerCheckpoints(sql: Sql): Promise<LedgerCheckpointRow[]> {
  return (await sql.all('SELECT * FROM llm_ledger_checkpoints ORDER BY from_seq')) as LedgerCheckpointRow[];
}
