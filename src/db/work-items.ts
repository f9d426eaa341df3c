/**
 * llm_work_items: the rows and what is read of them — an item inserted, found, listed by thread, and the
 * queue's depth and next due times. The lease's statements are claims (work-item-claims.ts: queued →
 * claimed, parked, due again), its state moves after it (work-item-moves.ts).
 */
import type { Sql } from '../core/sql.js';
import type { WorkItemRow } from './schema.js';
import { inJsonArray } from './dialect.js';

export async function insertWorkItem(sql: Sql, row: WorkItemRow): Promise<void> {
  await sql.run(
    `INSERT INTO llm_work_items (id, thread_id, sequence, status, attempt, max_attempts, repair_count, escalated, lock_scope,
       project_id, priority, not_before, deadline_at, lease_owner, lease_expires_at, error_code, error_message, created_at,
       started_at, finished_at)
     VALUES (@id, @thread_id, @sequence, @status, @attempt, @max_attempts, @repair_count, @escalated, @lock_scope,
       @project_id, @priority, @not_before, @deadline_at, @lease_owner, @lease_expires_at, @error_code, @error_message, @created_at,
       @started_at, @finished_at)`,
    row,
  );
}

export function getWorkItem(sql: Sql, id: string): Promise<WorkItemRow | undefined> {
  return sql.get<WorkItemRow>('SELECT * FROM llm_work_items WHERE id = ?', [id]);
}

/** The leased items (claimed or running) of these threads. */
export async function listLeasedWorkItemsOfThreads(sql: Sql, threadIds: readonly string[]): Promise<WorkItemRow[]> {
  return (await sql.all(`SELECT * FROM llm_work_items WHERE ${inJsonArray(sql.dialect, 'thread_id', '@ids')} AND status IN ('claimed', 'running')`, {
    ids: JSON.stringify(threadIds),
  })) as WorkItemRow[];
}

export async function listWorkItemsForThread(sql: Sql, threadId: string): Promise<WorkItemRow[]> {
  return (await sql.all('SELECT * FROM llm_work_items WHERE thread_id = ? ORDER BY sequence', [threadId])) as WorkItemRow[];
}

/** The thread's newest work item (highest sequence). */
export async function getLatestWorkItem(sql: Sql, threadId: string): Promise<WorkItemRow | undefined> {
  return (await sql.get('SELECT * FROM llm_work_items WHERE thread_id = ? ORDER BY sequence DESC LIMIT 1', [threadId])) as WorkItemRow | undefined;
}

/**
 * Queue depth for backpressure: every queued item, due or not (parked and backing-off items included).
 * Kept by triggers, not a count of the queue: it is read on every command. SQLite: one row (migration
 * 0009). Postgres: a row per shard, each session adding its items' moves to a shard of its own (pg
 * migrations 0001, 0017), so no transaction waits for another's counter row; the depth is their sum.
 */
export async function countQueuedWorkItems(sql: Sql): Promise<number> {
  const text =
    sql.dialect === 'postgres' ? 'SELECT coalesce(sum(queued), 0) AS queued FROM llm_queue_depth' : 'SELECT queued FROM llm_queue_depth WHERE id = 1';
  return ((await sql.get(text)) as { queued: number }).queued;
}

/** Queued items whose deadline passed before they started. */
export async function listQueuedPastDeadline(sql: Sql, now: number, limit: number): Promise<WorkItemRow[]> {
  return (await sql.all(
    `SELECT * FROM llm_work_items INDEXED BY idx_work_items_deadline
     WHERE status = 'queued' AND deadline_at IS NOT NULL AND deadline_at <= ? LIMIT ?`,
    [now, limit],
  )) as WorkItemRow[];
}

/** Queued items that are due now: work waiting for a call slot (the queue depth metric). */
export async function countQueuedDue(sql: Sql, now: number): Promise<number> {
  return (
    (await sql.get(`SELECT count(*) AS n FROM llm_work_items INDEXED BY idx_work_items_claimable WHERE status = 'queued' AND not_before <= ?`, [now])) as {
      n: number;
    }
  ).n;
}

/**
 * When the earliest queued item becomes due (null if none is queued). The engine asks on every wake-up,
 * and every command wakes it, so this must not scan the queue: the claimable index is ordered by
 * (priority, not_before), so the answer is the first entry of each priority. The recursive CTE walks the
 * few distinct priorities (one index seek each) and takes the first not_before of each.
 */
export async function nextQueuedDueAt(sql: Sql): Promise<number | null> {
  const row = (await sql.get(`WITH RECURSIVE p(priority) AS (
       SELECT min(priority) FROM llm_work_items INDEXED BY idx_work_items_claimable WHERE status = 'queued'
       UNION ALL
       SELECT (SELECT min(priority) FROM llm_work_items INDEXED BY idx_work_items_claimable
               WHERE status = 'queued' AND priority > p.priority)
       FROM p WHERE p.priority IS NOT NULL)
     SELECT min((SELECT min(not_before) FROM llm_work_items INDEXED BY idx_work_items_claimable
                 WHERE status = 'queued' AND priority = p.priority)) AS t
     FROM p WHERE p.priority IS NOT NULL`)) as { t: number | null };
  return row.t;
}

/** The earliest deadline among queued items (null if none has one). */
export async function nextQueuedDeadline(sql: Sql): Promise<number | null> {
  const row = (await sql.get(`SELECT min(deadline_at) AS t FROM llm_work_items INDEXED BY idx_work_items_deadline
     WHERE status = 'queued' AND deadline_at IS NOT NULL`)) as { t: number | null };
  return row.t;
}

export async function countWorkItemsByStatus(sql: Sql): Promise<{ status: string; n: number }[]> {
  return (await sql.all('SELECT status, count(*) AS n FROM llm_work_items GROUP BY status')) as {
    status: string;
    n: number;
  }[];
}
