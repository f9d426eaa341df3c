/** llm_threads: intent containers. Every status change is one guarded UPDATE. */
import { StaleStateError } from '../core/errors.js';
import type { Sql } from '../core/sql.js';
import { SYSTEM_PROJECT_ID } from '../domain/project.js';
import type { ThreadStatus } from '../domain/states.js';
import { assertThreadTransition } from '../domain/states.js';
import { insertionOrder, inJsonArray, inJsonArrayInitPlanPg, jsonText, statusTestNoPartialIndex } from './dialect.js';
import type { ThreadRow } from './schema.js';
import { changedOne, runGuarded } from './statements.js';

export async function insertThread(sql: Sql, row: ThreadRow): Promise<void> {
  await sql.run(
    `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, status, parent_thread_id,
       idempotency_key, role, input, created_by, traceparent, created_at, closed_at)
     VALUES (@id, @kind, @space_type, @space_id, @target_ref, @status, @parent_thread_id,
       @idempotency_key, @role, @input, @created_by, @traceparent, @created_at, @closed_at)`,
    row,
  );
}

/**
 * Inserts a new request's thread unless an open or running thread already has its idempotency key
 * (the partial unique index `uq_threads_idempotency_active`): false then, and nothing is written. One
 * statement, so two daemons submitting the same request at once never both insert: on Postgres the
 * second waits for the first's commit and then does nothing.
 */
export async function insertThreadUnlessActive(sql: Sql, row: ThreadRow): Promise<boolean> {
  const result = await sql.run(
    `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, status, parent_thread_id,
       idempotency_key, role, input, created_by, traceparent, created_at, closed_at)
     VALUES (@id, @kind, @space_type, @space_id, @target_ref, @status, @parent_thread_id,
       @idempotency_key, @role, @input, @created_by, @traceparent, @created_at, @closed_at)
     ON CONFLICT (idempotency_key) WHERE status IN ('open', 'running') DO NOTHING`,
    row,
  );
  return result.changes === 1;
}

export function getThread(sql: Sql, id: string): Promise<ThreadRow | undefined> {
  return sql.get<ThreadRow>('SELECT * FROM llm_threads WHERE id = ?', [id]);
}

/**
 * The thread, its row locked until the transaction ends, for a decision about it that reads other rows
 * (an orchestration closes when its last child ends): concurrent transactions deciding about the same
 * thread then run one after the other, the second seeing what the first committed. Postgres only needs
 * it; SQLite's single writer already runs every write alone.
 */
export function lockThread(sql: Sql, id: string): Promise<ThreadRow | undefined> {
  if (sql.dialect === 'postgres') return sql.get<ThreadRow>('SELECT * FROM llm_threads WHERE id = ? FOR UPDATE', [id]);
  return getThread(sql, id);
}

/**
 * The thread as its last committed move left it, held from moving until this transaction ends: on
 * Postgres `FOR SHARE`, so a move in flight (an UPDATE of its status) is waited for and read, and a
 * later one waits for this transaction (foreign-key checks and readers do not). For a decision that
 * links another row to the thread and must see its end if the end came first (a schedule run joining
 * a running thread: scheduler/start-run.ts). SQLite's single writer already runs every write alone.
 */
export function lockThreadAgainstMoves(sql: Sql, id: string): Promise<ThreadRow | undefined> {
  if (sql.dialect === 'postgres') return sql.get<ThreadRow>('SELECT * FROM llm_threads WHERE id = ? FOR SHARE', [id]);
  return getThread(sql, id);
}

/** The open or running thread for a semantic request, if any (at most one, by the partial unique index). */
export async function findActiveThreadByKey(sql: Sql, key: string): Promise<ThreadRow | undefined> {
  return (await sql.get("SELECT * FROM llm_threads WHERE idempotency_key = ? AND status IN ('open', 'running')", [key])) as ThreadRow | undefined;
}

/**
 * The open or running threads of these keys (at most one per key: a unique partial index), for a bulk
 * submit that checks many keys at once.
 */
export async function listActiveThreadsByKeys(sql: Sql, keys: readonly string[]): Promise<ThreadRow[]> {
  if (keys.length === 0) return [];
  return (await sql.all(`SELECT * FROM llm_threads WHERE ${inJsonArray(sql.dialect, 'idempotency_key', '@keys')} AND status IN ('open', 'running')`, {
    keys: JSON.stringify(keys),
  })) as ThreadRow[];
}

/**
 * The most recent complete thread of each of these keys (keys with none are absent). `status = 'complete'` is
 * written literally: it is idx_threads_key_complete's predicate, which a bound status would not match in
 * Postgres's generic plan (SQLite compares a bound value, re-preparing).
 */
export async function latestCompleteThreadsByKeys(sql: Sql, keys: readonly string[]): Promise<Map<string, ThreadRow>> {
  const latest = new Map<string, ThreadRow>();
  if (keys.length === 0) return latest;
  // Oldest first, so the last one kept per key is the most recent (the order of findLatestCompleteThreadByKey).
  const rows = (await sql.all(
    `SELECT * FROM llm_threads WHERE ${inJsonArray(sql.dialect, 'idempotency_key', '@keys')} AND status = 'complete'
     ORDER BY created_at, ${insertionOrder(sql.dialect)}`,
    { keys: JSON.stringify(keys) },
  )) as ThreadRow[];
  for (const row of rows) latest.set(row.idempotency_key, row);
  return latest;
}

/** The most recent complete thread for a semantic request (`status` literal, as in latestCompleteThreadsByKeys). */
export async function findLatestCompleteThreadByKey(sql: Sql, key: string): Promise<ThreadRow | undefined> {
  return sql.get<ThreadRow>(
    `SELECT * FROM llm_threads WHERE idempotency_key = ? AND status = 'complete' ORDER BY created_at DESC, ${insertionOrder(sql.dialect)} DESC LIMIT 1`,
    [key],
  );
}

/**
 * Complete threads that have work items but no applied one (`combine ledger verify`: a completion the
 * ledger cannot explain). A scan of llm_threads on purpose: most threads are complete, and SQLite would
 * otherwise walk idx_threads_key_complete (its predicate is this WHERE) and read each row by rowid, 1.4–1.7×
 * slower at 1,000,000 threads; `NOT INDEXED` keeps it off every index of t. Postgres seq-scans either way.
 */
export async function listCompleteThreadsWithoutAppliedItem(sql: Sql): Promise<string[]> {
  const notIndexed = sql.dialect === 'sqlite' ? ' NOT INDEXED' : '';
  return (
    (await sql.all(`SELECT t.id FROM llm_threads t${notIndexed}
       WHERE t.status = 'complete'
         AND EXISTS (SELECT 1 FROM llm_work_items w WHERE w.thread_id = t.id)
         AND NOT EXISTS (SELECT 1 FROM llm_work_items w WHERE w.thread_id = t.id AND w.status = 'applied')`)) as { id: string }[]
  ).map((r) => r.id);
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
 * previous page's last row — `id` on Postgres, see dialect.ts), never by OFFSET.
 */
export async function listThreads(sql: Sql, f: ThreadListFilter): Promise<ThreadRow[]> {
  const q = threadListQuery(f, sql.dialect);
  return q ? ((await sql.all(q.sql, q.params)) as ThreadRow[]) : [];
}

/** The statement and values of `listThreads`; null when the filters exclude every thread. */
export function threadListQuery(f: ThreadListFilter, dialect: Sql['dialect'] = 'sqlite'): { sql: string; params: Record<string, unknown> } | null {
  const order = insertionOrder(dialect);
  const params: Record<string, unknown> = { limit: f.limit };
  // The daemon's own threads (the canary's, in its system project) are not users' threads.
  const where: string[] = [`space_id <> '${SYSTEM_PROJECT_ID}'`];
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
    where.push(`(created_at, ${order}) < (SELECT created_at, ${order} FROM llm_threads WHERE id = @after)`);
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
     ORDER BY created_at DESC, ${order} DESC LIMIT @limit`;
  return { sql, params };
}

/** An orchestration's children with their newest work item's error (what a person asks first about a failure). */
export async function listChildThreadsWithLatestError(
  sql: Sql,
  parentId: string,
  limit: number,
): Promise<(ThreadRow & { error_code: string | null; error_message: string | null })[]> {
  return (await sql.all(
    `SELECT c.*, w.error_code, w.error_message FROM llm_threads c
     LEFT JOIN llm_work_items w ON w.thread_id = c.id
       AND w.sequence = (SELECT max(sequence) FROM llm_work_items WHERE thread_id = c.id)
     WHERE c.parent_thread_id = ? ORDER BY c.created_at, ${insertionOrder(sql.dialect, 'c.')} LIMIT ?`,
    [parentId, limit],
  )) as (ThreadRow & { error_code: string | null; error_message: string | null })[];
}

export async function listChildThreads(sql: Sql, parentId: string): Promise<ThreadRow[]> {
  return sql.all<ThreadRow>(`SELECT * FROM llm_threads WHERE parent_thread_id = ? ORDER BY created_at, ${insertionOrder(sql.dialect)}`, [parentId]);
}

export function countChildThreadsByStatus(sql: Sql, parentId: string): Promise<{ status: string; n: number }[]> {
  return sql.all<{ status: string; n: number }>('SELECT status, count(*) AS n FROM llm_threads WHERE parent_thread_id = ? GROUP BY status', [parentId]);
}

export async function countThreadsByStatus(sql: Sql): Promise<{ status: string; n: number }[]> {
  return (await sql.all('SELECT status, count(*) AS n FROM llm_threads GROUP BY status')) as {
    status: string;
    n: number;
  }[];
}

/** Parents still open or running whose every child has ended: the recovery scan closes them. */
export async function listParentsWithAllChildrenTerminal(sql: Sql): Promise<ThreadRow[]> {
  return (await sql.all(`SELECT p.* FROM llm_threads p INDEXED BY idx_threads_active
     WHERE p.status IN ('open', 'running')
       AND EXISTS (SELECT 1 FROM llm_threads c WHERE c.parent_thread_id = p.id)
       AND NOT EXISTS (SELECT 1 FROM llm_threads c WHERE c.parent_thread_id = p.id AND c.status IN ('open', 'running'))`)) as ThreadRow[];
}

/**
 * Cancels those of these threads still open or running, in one statement — a bulk cancel. Returns the
 * threads it canceled: one that ended meanwhile (another daemon finished it) keeps its end.
 */
export async function cancelActiveThreads(sql: Sql, ids: readonly string[], now: number): Promise<ThreadRow[]> {
  if (ids.length === 0) return [];
  const text = sql.dialect === 'postgres' ? CANCEL_ACTIVE_THREADS_PG : CANCEL_ACTIVE_THREADS_SQLITE;
  return (await sql.all(text, { ids: JSON.stringify(ids), now })) as ThreadRow[];
}

const CANCEL_ACTIVE_THREADS_SQLITE = `UPDATE llm_threads SET status = 'canceled', closed_at = @now
  WHERE ${inJsonArray('sqlite', 'id', '@ids')} AND status IN ('open', 'running')
  RETURNING *`;

/**
 * Postgres: the threads are locked in id order first (the subquery's ORDER BY comes before its row
 * locks), as a start of several items takes them (engine/starts.ts `startThreads`): a plain UPDATE
 * locks them in the order it finds them, and a cancel holding one child while waiting for another that
 * such a closure holds, which waits for the first, was a deadlock (engine/tx.ts LOCK ORDER).
 */
const CANCEL_ACTIVE_THREADS_PG = `UPDATE llm_threads SET status = 'canceled', closed_at = @now
  WHERE id IN (SELECT id FROM llm_threads WHERE ${inJsonArray('postgres', 'id', '@ids')} AND status IN ('open', 'running') ORDER BY id FOR NO KEY UPDATE)
    AND status IN ('open', 'running')
  RETURNING *`;

/**
 * Moves a thread from `from` to `to`; a terminal `to` also stamps closed_at, a reopening clears it.
 * Throws on a transition the table forbids, and StaleStateError if the thread was not in `from` — or no
 * longer has the parent it was read with (see `transitionThreadIfStill`).
 */
export function transitionThread(sql: Sql, thread: ReadThread, from: ThreadStatus, to: ThreadStatus, now: number): Promise<void> {
  assertThreadTransition(from, to);
  return runGuarded(sql, TRANSITION_TEXT, transitionParams(thread, from, to, now), `thread ${thread.id} is not ${from} under the parent it was read with`);
}

/**
 * `transitionThread` for a caller that can act on "not in `from` any more" (it read the row earlier in
 * its transaction): whether the one guarded UPDATE changed the row; false changes nothing. Guarded by
 * the parent too: an orchestration adopting the thread (`adoptThreads`, on Postgres committed after the
 * caller read it) gives it the parent whose close its end must check, and a caller that read no parent
 * and ended it anyway left that orchestration open until the recovery scan.
 */
export function transitionThreadIfStill(sql: Sql, thread: ReadThread, from: ThreadStatus, to: ThreadStatus, now: number): Promise<boolean> {
  assertThreadTransition(from, to);
  return changedOne(sql, TRANSITION_TEXT, transitionParams(thread, from, to, now));
}

/** A thread as a transaction read it: its id, and the parent it had then. */
export type ReadThread = Pick<ThreadRow, 'id' | 'parent_thread_id'>;

const TRANSITION_TEXT =
  'UPDATE llm_threads SET status = @to, closed_at = @closed_at WHERE id = @id AND status = @from AND parent_thread_id IS NOT DISTINCT FROM @parent';

export function transitionParams(thread: ReadThread, from: ThreadStatus, to: ThreadStatus, now: number) {
  const closing = to === 'complete' || to === 'failed' || to === 'canceled';
  return { id: thread.id, parent: thread.parent_thread_id, from, to, closed_at: closing ? now : null };
}

/** The thread rows a start's transaction changes (engine/starts.ts `startThreads`), and which of them it moves. */
export interface ThreadStarts {
  /** The threads it starts or may end: locked first, in id order. */
  children: readonly string[];
  /** Of `children`, those to move open → running. */
  start: readonly string[];
  /** Orchestrations that start with their first child: locked next (with `closeParents`, in id order) and started, only while open. */
  startParents: readonly string[];
  /** Orchestrations a failing child may close: locked with `startParents`, whatever their status. */
  closeParents: readonly string[];
}

/**
 * open → running for the threads `start` and the orchestrations `startParents` still open, in one
 * statement. Postgres: it first locks every thread the transaction changes, children before any
 * orchestration, each group in id order (a locking CTE's ORDER BY comes before its row locks; a plain
 * UPDATE locks in the order it finds rows), so that a start of several items takes them in the LOCK
 * ORDER of engine/tx.ts. An orchestration starts with its first child; for the others it is not open and
 * is neither changed nor locked. Returns the rows it moved; the caller checks the guard (engine/starts.ts
 * `startThreads`: a thread asked for and not moved is a StaleStateError).
 */
export function startThreadsInLockOrder(sql: Sql, s: ThreadStarts): Promise<ThreadRow[]> {
  const list = (ids: readonly string[]) => JSON.stringify(ids);
  if (sql.dialect !== 'postgres') return sql.all<ThreadRow>(START_THREADS_SQLITE, { start: list(s.start), start_parents: list(s.startParents) });
  return sql.all<ThreadRow>(START_THREADS_PG, {
    children: list(s.children),
    start: list(s.start),
    start_parents: list(s.startParents),
    close_parents: list(s.closeParents),
  });
}

const START_THREADS_SQLITE = `UPDATE llm_threads SET status = 'running', closed_at = NULL
  WHERE (${inJsonArray('sqlite', 'id', '@start')} OR ${inJsonArray('sqlite', 'id', '@start_parents')}) AND status = 'open'
  RETURNING *`;

// The locks first (a MATERIALIZED CTE: its rows are locked in its ORDER BY's order), then the UPDATE of
// those still open, by their keys: the lists as InitPlans and the status test through
// `statusTestNoPartialIndex` give one generic plan right for every call (dialect.ts; with `inJsonArray` each
// call was planned again, 0.4 ms, and the generic plan of that shape rescanned the locking subquery for each
// row to update, after a scan of a partial index of every active thread). The CTE runs only when the
// UPDATE's id list is first needed, so that list is the UPDATE's only filter: with another ANDed before it
// (say `(status = 'open') IS TRUE`), a sequential scan of a small table with no open row tested that one
// first, never needed the list and locked nothing (a start that only fails its children: later statements
// then locked child, orchestration, child…, against engine/tx.ts LOCK ORDER). `locked.status` is the row
// as locked (its latest version), which no one else can change before COMMIT: the UPDATE needs no test of
// its own.
const initPlan = (param: string) => inJsonArrayInitPlanPg('id', param);
const START_THREADS_PG = `WITH locked AS MATERIALIZED (SELECT id, status FROM llm_threads
      WHERE ${initPlan('@children')} OR ${initPlan('@close_parents')}
        OR (${initPlan('@start_parents')} AND ${statusTestNoPartialIndex('postgres', 'open')})
      ORDER BY ${initPlan('@children')} DESC, id FOR NO KEY UPDATE)
  UPDATE llm_threads SET status = 'running', closed_at = NULL
  WHERE id = ANY(ARRAY(SELECT id FROM locked WHERE status = 'open' AND (${initPlan('@start')} OR ${initPlan('@start_parents')})))
  RETURNING *`;

/**
 * Makes active threads with no parent children of an orchestration (generate-all adopts the epic runs
 * already in progress instead of paying for second ones), in one statement; every one must move
 * (StaleStateError otherwise). Postgres: locked in id order first, as a start of several items takes
 * them (engine/tx.ts LOCK ORDER); one at a time in the epics' order crossed such a start.
 */
export async function adoptThreads(sql: Sql, ids: readonly string[], parentId: string): Promise<void> {
  if (ids.length === 0) return;
  const result = await sql.run(sql.dialect === 'postgres' ? ADOPT_PG : ADOPT_SQLITE, { ids: JSON.stringify(ids), parentId });
  if (result.changes !== ids.length) throw new StaleStateError(`threads ${ids.join(', ')} cannot all be adopted`);
}

const ADOPT_SQLITE = `UPDATE llm_threads SET parent_thread_id = @parentId
  WHERE ${inJsonArray('sqlite', 'id', '@ids')} AND parent_thread_id IS NULL AND status IN ('open', 'running')`;

const ADOPT_PG = `UPDATE llm_threads SET parent_thread_id = @parentId
  WHERE id IN (SELECT id FROM llm_threads WHERE ${inJsonArray('postgres', 'id', '@ids')} ORDER BY id FOR NO KEY UPDATE)
    AND parent_thread_id IS NULL AND status IN ('open', 'running')`;

/** Every thread of a space (project), oldest first: what `ledger export --project` walks. */
export async function listThreadsForSpace(sql: Sql, spaceId: string): Promise<ThreadRow[]> {
  return sql.all<ThreadRow>(`SELECT * FROM llm_threads WHERE space_id = ? ORDER BY created_at, ${insertionOrder(sql.dialect)}`, [spaceId]);
}

/**
 * Active threads whose target is this document (`doc` and `briefing` say "not ready" instead of "not
 * found" while one runs). Reads the partial index of active threads, which stays small.
 */
export async function listActiveThreadsForDocument(sql: Sql, p: { project_id: string; doc_type: string; key: string }): Promise<ThreadRow[]> {
  return (await sql.all(
    `SELECT * FROM llm_threads INDEXED BY idx_threads_active
     WHERE status IN ('open', 'running')
       AND ${jsonText(sql.dialect, 'target_ref', 'project_id')} = @project_id
       AND ${jsonText(sql.dialect, 'target_ref', 'doc_type')} = @doc_type
       AND coalesce(${jsonText(sql.dialect, 'target_ref', 'key')}, '') = @key
     ORDER BY created_at`,
    p,
  )) as ThreadRow[];
}
