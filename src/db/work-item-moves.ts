/**
 * A leased work item's state moves after its claim (claimed → running → applied, back to the queue, or to
 * an end), and a cancel's end of queued items. Every move is guarded by the status it expects and, while
 * leased, by the lease owner, so a worker that lost its lease can never complete an item.
 */
import type { Sql } from '../core/sql.js';
import type { WorkItemStatus } from '../domain/states.js';
import { assertWorkItemTransition } from '../domain/states.js';
import type { MutationRow, WorkItemRow } from './schema.js';
import { inJsonArray, inJsonArrayInitPlanPg, statusTestNoPartialIndex } from './dialect.js';
import { expectOneChange, runGuardedAllAtCommit, runGuardedAtCommitAlong } from './statements.js';

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

const MARK_RUNNING_SQLITE = `UPDATE llm_work_items SET status = 'running' WHERE ${inJsonArray('sqlite', 'id', '@ids')} AND status = 'claimed' AND lease_owner = @owner`;
// One generic plan per connection, by the primary key (dialect.ts `inJsonArrayInitPlanPg`,
// `statusTestNoPartialIndex`; with `inJsonArray` and `status = 'claimed'` about half the calls were planned
// again, and the other half's generic plan scanned idx_work_items_leased whole).
const MARK_RUNNING_PG = `UPDATE llm_work_items SET status = 'running'
  WHERE ${inJsonArrayInitPlanPg('id', '@ids')} AND ${statusTestNoPartialIndex('postgres', 'claimed')} AND lease_owner = @owner`;

/**
 * running → applied, with the mutation row that records the change the item applied (unique per work
 * item: a second application of one item fails on it instead of applying twice). Clears the lease. On
 * Postgres one statement among the transaction's last (`runGuardedAtCommitAlong`: the COMMIT's query, no
 * round trip of its own, the item's count checked by the database): the item's guarded UPDATE with the
 * mutation's INSERT beside it. The step locked the item with its first read, so nothing can change it
 * before, and nothing after it in the transaction reads the item's or the mutation's row. The INSERT's
 * foreign key check on the item (an AFTER trigger, at the statement's end) sees the item's row as the
 * UPDATE left it.
 */
export function markWorkItemApplied(sql: Sql, p: { owner: string; now: number }, mutation: MutationRow): Promise<void> {
  assertWorkItemTransition('running', 'applied');
  // SQLite runs the INSERT, then the UPDATE: two statements, as it has no data-modifying CTE (a WITH
  // there holds only SELECTs), and each is a call in the process there, not a round trip.
  // The INSERT shares the UPDATE's parameters (the item's id, `now`): one set of them.
  return runGuardedAtCommitAlong(
    sql,
    MARK_APPLIED,
    { ...mutation, owner: p.owner, now: p.now },
    `work item ${mutation.work_item_id} is not running under ${p.owner}`,
    {
      text: INSERT_MUTATION,
    },
  );
}

const MARK_APPLIED = `UPDATE llm_work_items
     SET status = 'applied', finished_at = @now, lease_owner = NULL, lease_expires_at = NULL,
         error_code = NULL, error_message = NULL
     WHERE id = @work_item_id AND status = 'running' AND lease_owner = @owner`;

const INSERT_MUTATION = `INSERT INTO mutations (id, work_item_id, thread_id, document_id, from_version, to_version, summary, created_at, response_seq)
     VALUES (@id, @work_item_id, @thread_id, @document_id, @from_version, @to_version, @summary, @created_at, @response_seq)`;

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
