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
       idempotency_key, role, input, created_by, created_at, closed_at)
     VALUES (@id, @kind, @space_type, @space_id, @target_ref, @status, @parent_thread_id,
       @idempotency_key, @role, @input, @created_by, @created_at, @closed_at)`,
  ).run(row);
}

export function getThread(db: Db, id: string): ThreadRow | undefined {
  return prepared(db, 'SELECT * FROM llm_threads WHERE id = ?').get(id) as ThreadRow | undefined;
}

/** The open or running thread for a semantic request, if any (at most one, by the partial unique index). */
export function findActiveThreadByKey(db: Db, key: string): ThreadRow | undefined {
  return prepared(db, "SELECT * FROM llm_threads WHERE idempotency_key = ? AND status IN ('open', 'running')").get(key) as ThreadRow | undefined;
}

/** The most recent thread for a semantic request that ended with `status`. */
export function findLatestThreadByKeyAndStatus(db: Db, key: string, status: ThreadStatus): ThreadRow | undefined {
  return prepared(db, 'SELECT * FROM llm_threads WHERE idempotency_key = ? AND status = ? ORDER BY created_at DESC, rowid DESC LIMIT 1').get(key, status) as
    | ThreadRow
    | undefined;
}

export interface ThreadListFilter {
  /** Only open and running threads. */
  active: boolean;
  projectId: string | null;
  limit: number;
  /** Only threads in one of these statuses (absent or empty: any). */
  statuses?: readonly string[];
  kind?: string | null;
  parentId?: string | null;
  /** Keyset paging: only threads listed after this one (the last thread of the previous page). */
  afterThreadId?: string | null;
  /** Only threads created at or after this time (ms). */
  since?: number | null;
}

/** Partial indexes over a few statuses, with the condition a query must repeat literally to use one. */
const STATUS_INDEXES = [
  { index: 'idx_threads_active', statuses: ['open', 'running'], sql: "status IN ('open', 'running')" },
  { index: 'idx_threads_ended_badly', statuses: ['failed', 'canceled'], sql: "status IN ('failed', 'canceled')" },
] as const;

/**
 * Newest first (ties by insertion order), one page. The WHERE clause is assembled from fixed fragments
 * with bound values, so each combination of filters is one cached statement. Every combination reads
 * an index in the list's order, so a page costs about its rows, not the table: statuses within open /
 * running or within failed / canceled read their partial index (few rows, however many threads
 * completed), a project its (space_id, created_at) index, a kind its (kind, created_at) index, a parent
 * its children, the rest the created_at index. Paging is by keyset (`(created_at, rowid)` below the
 * previous page's last row), never by OFFSET.
 */
export function listThreads(db: Db, f: ThreadListFilter): ThreadRow[] {
  const q = threadListQuery(f);
  return q ? (prepared(db, q.sql).all(q.params) as ThreadRow[]) : [];
}

/** The statement and values of `listThreads`; null when the filters exclude every thread. */
export function threadListQuery(f: ThreadListFilter): { sql: string; params: Record<string, unknown> } | null {
  const params: Record<string, unknown> = { limit: f.limit };
  const where: string[] = [];
  let statuses = f.statuses && f.statuses.length > 0 ? [...new Set(f.statuses)] : null;
  if (f.active) statuses = (statuses ?? ['open', 'running']).filter((s) => s === 'open' || s === 'running');
  if (statuses?.length === 0) return null;
  const partial = statuses ? STATUS_INDEXES.find((p) => statuses.every((s) => (p.statuses as readonly string[]).includes(s))) : undefined;
  if (partial) where.push(partial.sql);
  if (statuses && statuses.length < (partial?.statuses.length ?? Infinity)) {
    where.push(`status IN (${statuses.map((_, i) => `@status${i}`).join(', ')})`);
    statuses.forEach((s, i) => {
      params[`status${i}`] = s;
    });
  }
  if (f.projectId != null) {
    where.push('space_id = @project');
    params.project = f.projectId;
  }
  if (f.kind != null) {
    where.push('kind = @kind');
    params.kind = f.kind;
  }
  if (f.parentId != null) {
    where.push('parent_thread_id = @parent');
    params.parent = f.parentId;
  }
  if (f.afterThreadId != null) {
    where.push('(created_at, rowid) < (SELECT created_at, rowid FROM llm_threads WHERE id = @after)');
    params.after = f.afterThreadId;
  }
  if (f.since != null) {
    // A range on the order column: the index walk stops at the first older thread.
    where.push('created_at >= @since');
    params.since = f.since;
  }
  // A parent's children are few: its own index wins. Otherwise a partial index is the smallest to walk.
  const indexed = partial && f.parentId == null ? ` INDEXED BY ${partial.index}` : '';
  const sql = `SELECT * FROM llm_threads${indexed}${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''}
     ORDER BY created_at DESC, rowid DESC LIMIT @limit`;
  return { sql, params };
}

/** An orchestration's children with their newest work item's error (what a person asks first about a failure). */
export function listChildThreadsWithLatestError(
  db: Db,
  parentId: string,
  limit: number,
): (ThreadRow & { error_code: string | null; error_message: string | null })[] {
  return prepared(
    db,
    `SELECT c.*, w.error_code, w.error_message FROM llm_threads c
     LEFT JOIN llm_work_items w ON w.thread_id = c.id
       AND w.sequence = (SELECT max(sequence) FROM llm_work_items WHERE thread_id = c.id)
     WHERE c.parent_thread_id = ? ORDER BY c.created_at, c.rowid LIMIT ?`,
  ).all(parentId, limit) as (ThreadRow & { error_code: string | null; error_message: string | null })[];
}

export function listChildThreads(db: Db, parentId: string): ThreadRow[] {
  return prepared(db, 'SELECT * FROM llm_threads WHERE parent_thread_id = ? ORDER BY created_at, rowid').all(parentId) as ThreadRow[];
}

export function countChildThreadsByStatus(db: Db, parentId: string): { status: string; n: number }[] {
  return prepared(db, 'SELECT status, count(*) AS n FROM llm_threads WHERE parent_thread_id = ? GROUP BY status').all(parentId) as {
    status: string;
    n: number;
  }[];
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
  const result = prepared(db, 'UPDATE llm_threads SET status = @to, closed_at = @closed_at WHERE id = @id AND status = @from').run({
    id,
    from,
    to,
    closed_at: closing ? now : null,
  });
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

/**
 * Active threads whose target is this document (`doc` and `briefing` say "not ready" instead of "not
 * found" while one runs). Reads the partial index of active threads, which stays small.
 */
export function listActiveThreadsForDocument(db: Db, p: { project_id: string; doc_type: string; key: string }): ThreadRow[] {
  return prepared(
    db,
    `SELECT * FROM llm_threads INDEXED BY idx_threads_active
     WHERE status IN ('open', 'running')
       AND json_extract(target_ref, '$.project_id') = @project_id
       AND json_extract(target_ref, '$.doc_type') = @doc_type
       AND coalesce(json_extract(target_ref, '$.key'), '') = @key
     ORDER BY created_at`,
  ).all(p) as ThreadRow[];
}
