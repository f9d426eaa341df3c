/** llm_threads: intent containers. Every status change is one guarded UPDATE. */
import type { ThreadStatus } from '../domain/states.js';
import { assertThreadTransition } from '../domain/states.js';
import type { Db } from './connection.js';
import type { ThreadRow } from './schema.js';
import { expectOneChange, prepared } from './statements.js';

export function insertThread(db: Db, row: ThreadRow): void {
  prepared(
    db,
    `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, status, parent_thread_id,
       idempotency_key, created_by, created_at, closed_at)
     VALUES (@id, @kind, @space_type, @space_id, @target_ref, @status, @parent_thread_id,
       @idempotency_key, @created_by, @created_at, @closed_at)`,
  ).run(row);
}

export function getThread(db: Db, id: string): ThreadRow | undefined {
  return prepared(db, 'SELECT * FROM llm_threads WHERE id = ?').get(id) as ThreadRow | undefined;
}

/** The open or running thread for a semantic request, if any (at most one, by the partial unique index). */
export function findActiveThreadByKey(db: Db, key: string): ThreadRow | undefined {
  return prepared(db, "SELECT * FROM llm_threads WHERE idempotency_key = ? AND status IN ('open', 'running')").get(
    key,
  ) as ThreadRow | undefined;
}

/** The most recent thread for a semantic request that ended with `status`. */
export function findLatestThreadByKeyAndStatus(db: Db, key: string, status: ThreadStatus): ThreadRow | undefined {
  return prepared(
    db,
    'SELECT * FROM llm_threads WHERE idempotency_key = ? AND status = ? ORDER BY created_at DESC, rowid DESC LIMIT 1',
  ).get(key, status) as ThreadRow | undefined;
}

export interface ThreadListFilter {
  active: boolean;
  projectId: string | null;
  limit: number;
}

/** Newest first. `active` reads the partial index, so its cost does not grow with closed threads. */
export function listThreads(db: Db, f: ThreadListFilter): ThreadRow[] {
  if (f.active && f.projectId !== null) {
    return prepared(
      db,
      `SELECT * FROM llm_threads INDEXED BY idx_threads_active
       WHERE status IN ('open', 'running') AND space_id = ? ORDER BY created_at DESC LIMIT ?`,
    ).all(f.projectId, f.limit) as ThreadRow[];
  }
  if (f.active) {
    return prepared(
      db,
      `SELECT * FROM llm_threads INDEXED BY idx_threads_active
       WHERE status IN ('open', 'running') ORDER BY created_at DESC LIMIT ?`,
    ).all(f.limit) as ThreadRow[];
  }
  if (f.projectId !== null) {
    return prepared(db, 'SELECT * FROM llm_threads WHERE space_id = ? ORDER BY created_at DESC LIMIT ?').all(
      f.projectId,
      f.limit,
    ) as ThreadRow[];
  }
  return prepared(db, 'SELECT * FROM llm_threads ORDER BY created_at DESC LIMIT ?').all(f.limit) as ThreadRow[];
}

export interface ThreadSearch {
  /** Any of these statuses (all when empty). */
  statuses: readonly string[];
  kind: string | null;
  projectId: string | null;
  parentId: string | null;
  /** Created at or after this time (ms). */
  since: number | null;
  /** Keyset paging: only threads after this one in the list's order (newest first). */
  after: { created_at: number; id: string } | null;
  limit: number;
}

/**
 * `threads` with filters, newest first with the id breaking ties, so a page ends at a row the next
 * page can start after. Conditions are added only when given; each combination is its own prepared
 * statement (at most 64).
 */
export function searchThreads(db: Db, f: ThreadSearch): ThreadRow[] {
  const where: string[] = [];
  const params: Record<string, unknown> = { limit: f.limit };
  const add = (condition: string, values: Record<string, unknown>) => {
    where.push(condition);
    Object.assign(params, values);
  };
  if (f.statuses.length > 0) add('status IN (SELECT value FROM json_each(@statuses))', { statuses: JSON.stringify(f.statuses) });
  if (f.kind !== null) add('kind = @kind', { kind: f.kind });
  if (f.projectId !== null) add('space_id = @projectId', { projectId: f.projectId });
  if (f.parentId !== null) add('parent_thread_id = @parentId', { parentId: f.parentId });
  if (f.since !== null) add('created_at >= @since', { since: f.since });
  if (f.after !== null) add('(created_at < @afterAt OR (created_at = @afterAt AND id < @afterId))', { afterAt: f.after.created_at, afterId: f.after.id });
  const sql = `SELECT * FROM llm_threads ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT @limit`;
  return prepared(db, sql).all(params) as ThreadRow[];
}

/** An orchestration's children with their newest work item's error (what a person asks first about a failure). */
export function listChildThreadsWithLatestError(db: Db, parentId: string, limit: number): (ThreadRow & { error_code: string | null; error_message: string | null })[] {
  return prepared(
    db,
    `SELECT c.*, w.error_code, w.error_message FROM llm_threads c
     LEFT JOIN llm_work_items w ON w.thread_id = c.id
       AND w.sequence = (SELECT max(sequence) FROM llm_work_items WHERE thread_id = c.id)
     WHERE c.parent_thread_id = ? ORDER BY c.created_at, c.rowid LIMIT ?`,
  ).all(parentId, limit) as (ThreadRow & { error_code: string | null; error_message: string | null })[];
}

export function listChildThreads(db: Db, parentId: string): ThreadRow[] {
  return prepared(db, 'SELECT * FROM llm_threads WHERE parent_thread_id = ? ORDER BY created_at, rowid').all(
    parentId,
  ) as ThreadRow[];
}

export function countChildThreadsByStatus(db: Db, parentId: string): { status: string; n: number }[] {
  return prepared(
    db,
    'SELECT status, count(*) AS n FROM llm_threads WHERE parent_thread_id = ? GROUP BY status',
  ).all(parentId) as { status: string; n: number }[];
}

export function countThreadsByStatus(db: Db): { status: string; n: number }[] {
  return prepared(db, 'SELECT status, count(*) AS n FROM llm_threads GROUP BY status').all() as {
    status: string;
    n: number;
  }[];
}

/** Parents still open or running whose every child has ended: the recovery scan closes them. */
export function listParentsWithAllChildrenTerminal(db: Db): ThreadRow[] {
  return prepared(
    db,
    `SELECT p.* FROM llm_threads p INDEXED BY idx_threads_active
     WHERE p.status IN ('open', 'running')
       AND EXISTS (SELECT 1 FROM llm_threads c WHERE c.parent_thread_id = p.id)
       AND NOT EXISTS (SELECT 1 FROM llm_threads c WHERE c.parent_thread_id = p.id AND c.status IN ('open', 'running'))`,
  ).all() as ThreadRow[];
}

/**
 * Moves a thread from `from` to `to`; a terminal `to` also stamps closed_at, a reopening clears it.
 * Throws on a transition the table forbids, and StaleStateError if the thread was not in `from`.
 */
export function transitionThread(db: Db, id: string, from: ThreadStatus, to: ThreadStatus, now: number): void {
  assertThreadTransition(from, to);
  const closing = to === 'complete' || to === 'failed' || to === 'canceled';
  const result = prepared(
    db,
    'UPDATE llm_threads SET status = @to, closed_at = @closed_at WHERE id = @id AND status = @from',
  ).run({ id, from, to, closed_at: closing ? now : null });
  expectOneChange(result, `thread ${id} is not ${from}`);
}

/**
 * Makes an active thread with no parent a child of an orchestration (generate-all adopts the epic run
 * already in progress instead of paying for a second one).
 */
export function adoptThread(db: Db, id: string, parentId: string): void {
  const result = prepared(
    db,
    `UPDATE llm_threads SET parent_thread_id = @parentId
     WHERE id = @id AND parent_thread_id IS NULL AND status IN ('open', 'running')`,
  ).run({ id, parentId });
  expectOneChange(result, `thread ${id} cannot be adopted`);
}

/** Every thread of a space (project), oldest first: what `ledger export --project` walks. */
export function listThreadsForSpace(db: Db, spaceId: string): ThreadRow[] {
  return prepared(db, 'SELECT * FROM llm_threads WHERE space_id = ? ORDER BY created_at, rowid').all(spaceId) as ThreadRow[];
}
