/**
 * Claiming llm_work_items: which queued items can run now (the fair scheduler's heads), the lease taken by
 * one guarded UPDATE (queued → claimed) and given back, and the items held back from claims for a while
 * (parked for a budget) or made due at once. A claim is a lease (owner + expiry): every later state change
 * is guarded by it (work-item-moves.ts).
 */
import type { Sql } from '../core/sql.js';
import { assertWorkItemTransition } from '../domain/states.js';
import type { WorkItemRow } from './schema.js';
import { inJsonArray, skipLockedRows, statusTestNoPartialIndex } from './dialect.js';
import { expectOneChange } from './statements.js';
import { listClaimHeadsPg, listProjectClaimHeadsPg } from './pg/claim-heads.js';

export type ClaimHead = Pick<WorkItemRow, 'id' | 'project_id' | 'priority' | 'not_before' | 'lock_scope'>;

/**
 * The fair scheduler's candidates: for each (project, priority) with queued items, the oldest one that
 * can run now — due, not past its deadline, and whose lock scope no live holder has (so two mutations
 * of one epic never overlap). Few rows (projects × priority classes).
 *
 * The groups are found by a skip-scan: each step is one seek on idx_work_items_fair to the next
 * (project, priority) pair, so the cost grows with the number of groups, not with the queue (a plain
 * DISTINCT reads every queued entry: ~0.4 ms per claim at 10,000 queued). The walk runs inside one
 * statement on both dialects (pg/claim-heads.ts): walked from here it was three statements per group,
 * ~10 per claimed item over a claim round's start and its refreshes (bench/count-statements.ts).
 */
export async function listClaimHeads(sql: Sql, now: number): Promise<ClaimHead[]> {
  if (sql.dialect === 'postgres') return listClaimHeadsPg(sql, now);
  return sql.all<ClaimHead>(ALL_HEADS, { now });
}

/**
 * The candidates of one project (one per priority with queued items). A claim round refreshes these
 * after a park, an item held back or (SQLite) a claim in the project instead of walking every group
 * again; on Postgres a claim's candidate read brings its group's next head (db/item-with-thread.ts). `excluded`: items the
 * round held back (their endpoint's breaker is open, their model rate-limited): the next item of their
 * group is the candidate instead, so one held model never blocks the others queued behind it.
 */
export async function listProjectClaimHeads(sql: Sql, projectId: string, now: number, excluded: readonly string[] = []): Promise<ClaimHead[]> {
  if (sql.dialect === 'postgres') return listProjectClaimHeadsPg(sql, projectId, now, excluded);
  return excluded.length > 0
    ? sql.all<ClaimHead>(PROJECT_HEADS_EXCLUDING, { project_id: projectId, now, excluded: JSON.stringify(excluded) })
    : sql.all<ClaimHead>(PROJECT_HEADS, { project_id: projectId, now });
}

/**
 * A group's head (`g`: the group's row): the rowid of its oldest item that can run now, one index seek
 * walking past held or late items in due order. SQLite has no LATERAL: the head is joined by its rowid.
 * `excluding`: passing over the items in `@excluded` (a JSON array of ids, walked as a set).
 */
const NOT_EXCLUDED = ` AND NOT ${inJsonArray('sqlite', 'h.id', '@excluded')}`;

function headRowid(excluding: boolean): string {
  return `SELECT h.rowid FROM llm_work_items h INDEXED BY idx_work_items_fair
     WHERE h.status = 'queued' AND h.project_id = g.project_id AND h.priority = g.priority AND h.not_before <= @now
       AND (h.deadline_at IS NULL OR h.deadline_at > @now)${excluding ? NOT_EXCLUDED : ''}
       AND NOT EXISTS (
         SELECT 1 FROM locks l
         WHERE l.scope = h.lock_scope AND (l.expires_at IS NULL OR l.expires_at > @now))
     ORDER BY h.not_before LIMIT 1`;
}

/**
 * Every group's head, in (project, priority) order. Each recursive step seeks idx_work_items_fair to the
 * next group — a higher priority of the same project, else the next project: two range seeks, where one
 * row-value range `(project_id, priority) > (?, ?)` walks every queued entry of the project — and joins
 * that entry by rowid for its group.
 */
const ALL_HEADS = `WITH RECURSIVE g(project_id, priority) AS (
    SELECT * FROM (SELECT project_id, priority FROM llm_work_items INDEXED BY idx_work_items_fair
                   WHERE status = 'queued' ORDER BY project_id, priority LIMIT 1)
    UNION ALL
    SELECT n.project_id, n.priority FROM g JOIN llm_work_items n ON n.rowid = coalesce(
      (SELECT x.rowid FROM llm_work_items x INDEXED BY idx_work_items_fair
       WHERE x.status = 'queued' AND x.project_id = g.project_id AND x.priority > g.priority ORDER BY x.priority LIMIT 1),
      (SELECT x.rowid FROM llm_work_items x INDEXED BY idx_work_items_fair
       WHERE x.status = 'queued' AND x.project_id > g.project_id ORDER BY x.project_id, x.priority LIMIT 1))
  )
  SELECT w.id, w.project_id, w.priority, w.not_before, w.lock_scope FROM g JOIN llm_work_items w ON w.rowid = (${headRowid(false)})
  ORDER BY g.project_id, g.priority`;

/** One project's heads, by priority: the walk over its priorities, each group's head joined by rowid. */
function projectHeadsText(excluding: boolean): string {
  return `WITH RECURSIVE g(project_id, priority) AS (
    SELECT * FROM (SELECT project_id, priority FROM llm_work_items INDEXED BY idx_work_items_fair
                   WHERE status = 'queued' AND project_id = @project_id ORDER BY priority LIMIT 1)
    UNION ALL
    SELECT g.project_id, (SELECT x.priority FROM llm_work_items x INDEXED BY idx_work_items_fair
                          WHERE x.status = 'queued' AND x.project_id = g.project_id AND x.priority > g.priority
                          ORDER BY x.priority LIMIT 1) AS next
    FROM g WHERE g.priority IS NOT NULL
  )
  SELECT w.id, w.project_id, w.priority, w.not_before, w.lock_scope FROM g JOIN llm_work_items w ON w.rowid = (${headRowid(excluding)})
  WHERE g.priority IS NOT NULL
  ORDER BY g.priority`;
}

const PROJECT_HEADS = projectHeadsText(false);
const PROJECT_HEADS_EXCLUDING = projectHeadsText(true);

/**
 * Leases one chosen item: queued → claimed. One guarded UPDATE: of two claimers racing for the same
 * row, exactly one sees a changed row; `not_before` in the guard keeps a parked item parked. On
 * Postgres the row is taken with SKIP LOCKED: when another daemon's transaction is claiming it right
 * now, this returns nothing at once instead of waiting for that transaction (the caller picks another).
 */
export function claimWorkItem(sql: Sql, p: { id: string; owner: string; now: number; lease_until: number }): Promise<WorkItemRow | undefined> {
  assertWorkItemTransition('queued', 'claimed');
  return sql.get<WorkItemRow>(CLAIM_TEXT[sql.dialect], p);
}

/**
 * `claimWorkItem`'s statement per dialect, built once: a text built per call costs a copy and a hash of
 * its every character for the statement cache's look-up, once per claimed item.
 */
export const CLAIM_TEXT = {
  sqlite: claimText('sqlite'),
  postgres: claimText('postgres'),
};

/**
 * `claimWorkItem`'s statement claiming the item whose id is `id` (a parameter, or a subquery: db/claim-with-scope.ts).
 * Its row read looks the item up by its key (`statusTestNoPartialIndex`: as `status = 'queued'` a generic plan took
 * idx_work_items_fair with `not_before <= @now` its only index condition).
 */
export function claimText(dialect: Sql['dialect'], id = '@id'): string {
  return `UPDATE llm_work_items
     SET status = 'claimed', lease_owner = @owner, lease_expires_at = @lease_until,
         started_at = COALESCE(started_at, @now),
         -- a park is over once the item runs; other codes stay: they explain the last failed attempt
         error_code = CASE WHEN error_code = 'BUDGET_EXCEEDED' THEN NULL ELSE error_code END,
         error_message = CASE WHEN error_code = 'BUDGET_EXCEEDED' THEN NULL ELSE error_message END
     WHERE id = (SELECT id FROM llm_work_items WHERE id = ${id} AND ${statusTestNoPartialIndex(dialect, 'queued')} AND not_before <= @now${skipLockedRows(dialect)})
       AND status = 'queued'
     RETURNING *`;
}

/**
 * Undoes a claim made in this same transaction: one whose lock scope another daemon took meanwhile, or
 * (Postgres, claimed in the candidate's read: engine/producer.ts `claimThenAdmit`) one whose route then
 * refused the call (an open breaker, a 429's park, a rate limit). claimed → queued, as it was before
 * (`before`: the row the claim changed: its start time and error code and message). Guarded by this owner.
 */
export async function unclaimWorkItem(sql: Sql, p: { owner: string; before: WorkItemRow }): Promise<void> {
  assertWorkItemTransition('claimed', 'queued');
  const { id, started_at, error_code, error_message } = p.before;
  const result = await sql.run(
    `UPDATE llm_work_items
     SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, started_at = @started_at,
         error_code = @error_code, error_message = @error_message
     WHERE id = @id AND status = 'claimed' AND lease_owner = @owner`,
    { id, owner: p.owner, started_at, error_code, error_message },
  );
  expectOneChange(result, `work item ${id} is not claimed by ${p.owner}`);
}

/**
 * Parks a project's due queued items until `until` (BUDGET_EXCEEDED): they stay queued, keep their
 * attempt, and are not candidates until then or until `unparkBudgetItems`. Returns the parked rows.
 */
export async function parkProjectItems(sql: Sql, p: { project_id: string; now: number; until: number; message: string }): Promise<WorkItemRow[]> {
  return (await sql.all(
    `UPDATE llm_work_items INDEXED BY idx_work_items_fair
     SET not_before = @until, error_code = 'BUDGET_EXCEEDED', error_message = @message
     WHERE status = 'queued' AND project_id = @project_id AND not_before <= @now
     RETURNING *`,
    p,
  )) as WorkItemRow[];
}

/**
 * Makes a project's budget-parked items due again (the budget may allow them now: a reservation was
 * settled below its maximum or released). The claim re-checks the budget and parks them again if not.
 * `project_id` null: every project's (at start, when the configuration may have changed).
 */
// `CAST(@p AS TEXT) IS NULL`: Postgres cannot type a parameter from `IS NULL` alone.
export async function unparkBudgetItems(sql: Sql, p: { project_id: string | null; now: number }): Promise<number> {
  return (
    await sql.run(
      `UPDATE llm_work_items SET not_before = @now
     WHERE status = 'queued' AND error_code = 'BUDGET_EXCEEDED' AND not_before > @now
       AND (CAST(@project_id AS TEXT) IS NULL OR project_id = @project_id)`,
      p,
    )
  ).changes;
}

/**
 * `combine retry` of a thread whose item waits (its backoff after a 429, or a long provider wait): the
 * item becomes due now. Guarded by status: an item claimed meanwhile is left alone.
 */
export async function makeQueuedItemDueNow(sql: Sql, p: { id: string; now: number }): Promise<boolean> {
  return (await sql.run(`UPDATE llm_work_items SET not_before = @now WHERE id = @id AND status = 'queued' AND not_before > @now`, p)).changes === 1;
}
