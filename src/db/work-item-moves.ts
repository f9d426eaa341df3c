/**
 * A leased work item's state moves after its claim (claimed → running → applied, back to the queue, or to
 * an end), and a cancel's end of queued items. Every move is guarded by the status it expects and, while
 * leased, by the lease owner, so a worker that lost its lease can never complete an item.
 */
import type { Sql } from '../core/sql.js';
import type { WorkItemStatus } from '../domain/states.js';
import { assertWorkItemTransition } from '../domain/states.js';
import type { MutationRow, WorkItemRow } from './schema.js';
import { inJsonArray } from './dialect.js';
import { expectOneChange, runGuarded, runGuardedAllAtCommit } from './statements.js';

/**
 * claimed → running for the items of a start (engine/starts.ts): their prompts are recorded and their
 * calls are about to start. One statement for all of them, guarded like each one's: every item must
 * move (StaleStateError otherwise). On Postgres it runs in the COMMIT's query: the items are locked since
 * the start read them, so nothing can change them before it.
 */
export function markWorkItemsRunning(sql: Sql, ids: readonly string[], owner: string): Promise<void> {
  assertWorkItemTransition('claimed', 'running');
  const text = sql.dialect === 'postgres' ? MARK_RUNNING_PG : MARK_RUNNING_SQLITE;
  return runGuardedAllAtCommit(sql, text, { ids: JSON.stringify(ids), owner }, ids.length, `work items ${ids.join(', ')} are not all claimed by ${owner}`);
}

const markRunningText = (dialect: 'sqlite' | 'postgres') =>
  `UPDATE llm_work_items SET status = 'running' WHERE ${inJsonArray(dialect, 'id', '@ids')} AND status = 'claimed' AND lease_owner = @owner`;
const MARK_RUNNING_SQLITE = markRunningText('sqlite');
const MARK_RUNNING_PG = markRunningText('postgres');

/**
 * running → applied, with the mutation row that records the change the item applied (unique per work
 * item: a second application of one item fails on it instead of applying twice). Clears the lease. On
 * Postgres one statement among the transaction's last (the COMMIT's query: no round trip of its own, its
 * count checked by the database, migrations/pg/0012): the item's guarded UPDATE and the mutation's
 * INSERT, each a data-modifying CTE run to completion — two statements there until issue 18 target 9's
 * pgstmts2, each paying the server's per-statement costs. The step locked the item with its first read, so
 * nothing can change it before, and nothing after it in the transaction reads the item's or the mutation's
 * row. SQLite: the INSERT, then the guarded UPDATE.
 */
export async function markWorkItemApplied(sql: Sql, p: { owner: string; now: number }, mutation: MutationRow): Promise<void> {
  assertWorkItemTransition('running', 'applied');
  const what = `work item ${mutation.work_item_id} is not running under ${p.owner}`;
  if (!sql.atCommit) {
    await sql.run(INSERT_MUTATION, mutation);
    return runGuarded(sql, MARK_APPLIED, { id: mutation.work_item_id, owner: p.owner, now: p.now }, what);
  }
  const { id: mutation_id, work_item_id: id, ...rest } = mutation;
  sql.atCommit(MARK_APPLIED_RECORDING_MUTATION, { ...rest, mutation_id, id, owner: p.owner, now: p.now, guard_what: what }, ignore);
}

const MARK_APPLIED = `UPDATE llm_work_items
     SET status = 'applied', finished_at = @now, lease_owner = NULL, lease_expires_at = NULL,
         error_code = NULL, error_message = NULL
     WHERE id = @id AND status = 'running' AND lease_owner = @owner`;

const INSERT_MUTATION = `INSERT INTO mutations (id, work_item_id, thread_id, document_id, from_version, to_version, summary, created_at, response_seq)
     VALUES (@id, @work_item_id, @thread_id, @document_id, @from_version, @to_version, @summary, @created_at, @response_seq)`;

/**
 * Postgres: both, in one statement. The INSERT's CTE is not read by the outer query: Postgres runs every
 * data-modifying CTE exactly once, to completion, whether or not it is read. Its foreign key check on the
 * item (an AFTER trigger, at the statement's end) sees the item's row as this statement's UPDATE left it.
 */
const MARK_APPLIED_RECORDING_MUTATION = `WITH changed AS (${MARK_APPLIED} RETURNING 1),
  recorded AS (INSERT INTO mutations (id, work_item_id, thread_id, document_id, from_version, to_version, summary, created_at, response_seq)
     VALUES (@mutation_id, @id, @thread_id, @document_id, @from_version, @to_version, @summary, @created_at, @response_seq))
  SELECT combine_expect_one_change((SELECT count(*) FROM changed), @guard_what)`;

const ignore = (): void => undefined;

/**
 * Back to the queue with a new attempt number (transient failure, repair, or a claim that never
 * reached the provider), due at `not_before`. Clears the lease.
 */
export async function requeueWorkItem(
  sql: Sql,
  p: {
    id: string;
    from: 'claimed' | 'running';
    owner: string | null;
    attempt: number;
    repair_count: number;
    escalated: number;
    not_before: number;
    error_code: string | null;
    error_message: string | null;
  },
): Promise<void> {
  assertWorkItemTransition(p.from, 'queued');
  const result = await sql.run(
    `UPDATE llm_work_items
     SET status = 'queued', attempt = @attempt, repair_count = @repair_count, escalated = @escalated, not_before = @not_before,
         error_code = @error_code, error_message = @error_message, lease_owner = NULL, lease_expires_at = NULL
     WHERE id = @id AND status = @from AND lease_owner IS NOT DISTINCT FROM @owner`,
    p,
  );
  expectOneChange(result, `work item ${p.id} is not ${p.from} under ${p.owner}`);
}

/**
 * Ends the queued (never leased) items of these threads as `failed`, in one statement — a bulk cancel.
 * Returns the items it ended: one a claim took meanwhile is leased now, and its pipeline records the
 * cancel when the abort lands.
 */
export async function endQueuedWorkItemsOfThreads(
  sql: Sql,
  p: { threadIds: readonly string[]; error_code: string; error_message: string; now: number },
): Promise<WorkItemRow[]> {
  if (p.threadIds.length === 0) return [];
  assertWorkItemTransition('queued', 'failed');
  return (await sql.all(
    `UPDATE llm_work_items
     SET status = 'failed', error_code = @error_code, error_message = @error_message, finished_at = @now
     WHERE ${inJsonArray(sql.dialect, 'thread_id', '@thread_ids')} AND status = 'queued' AND lease_owner IS NULL
     RETURNING *`,
    { thread_ids: JSON.stringify(p.threadIds), error_code: p.error_code, error_message: p.error_message, now: p.now },
  )) as WorkItemRow[];
}

/**
 * To a terminal failure state (`dead_letter`, or `failed` when canceled). `owner` guards leased items;
 * pass null for a queued item (it has no lease).
 */
export async function endWorkItem(
  sql: Sql,
  p: {
    id: string;
    from: WorkItemStatus;
    to: 'failed' | 'dead_letter';
    owner: string | null;
    error_code: string;
    error_message: string;
    now: number;
  },
): Promise<void> {
  assertWorkItemTransition(p.from, p.to);
  const result = await sql.run(
    `UPDATE llm_work_items
     SET status = @to, error_code = @error_code, error_message = @error_message, finished_at = @now,
         lease_owner = NULL, lease_expires_at = NULL
     WHERE id = @id AND status = @from AND lease_owner IS NOT DISTINCT FROM @owner`,
    p,
  );
  expectOneChange(result, `work item ${p.id} is not ${p.from}`);
}
