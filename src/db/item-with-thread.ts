/**
 * A work item, its thread and its project in one statement. Every engine step (claim, start, response,
 * answer) works with the item and its thread, and the two that build the item's request (claim, start)
 * with its project: read apart, they were ten primary-key look-ups per item.
 */
import type { Sql } from '../core/sql.js';
import type { ChargeRow, ProjectRow, ThreadRow, WorkItemRow } from './schema.js';
import { inJsonArray, inJsonArrayInitPlanPg } from './dialect.js';
import { objectLiteralOf } from './statements.js';
import type { ClaimHead } from './work-item-claims.js';

/** Every column of a row type: a column added to the schema and missing here fails to compile. */
function allColumns<R>() {
  return <const C extends readonly (keyof R & string)[]>(columns: C & ([Exclude<keyof R, C[number]>] extends [never] ? unknown : never)): C => columns;
}

const ITEM_COLUMNS = allColumns<WorkItemRow>()([
  'id',
  'thread_id',
  'sequence',
  'status',
  'attempt',
  'max_attempts',
  'repair_count',
  'escalated',
  'lock_scope',
  'project_id',
  'priority',
  'not_before',
  'deadline_at',
  'lease_owner',
  'lease_expires_at',
  'error_code',
  'error_message',
  'created_at',
  'started_at',
  'finished_at',
]);

const THREAD_COLUMNS = allColumns<ThreadRow>()([
  'id',
  'kind',
  'space_type',
  'space_id',
  'target_ref',
  'status',
  'parent_thread_id',
  'idempotency_key',
  'role',
  'input',
  'created_by',
  'traceparent',
  'created_at',
  'closed_at',
]);

const PROJECT_COLUMNS = allColumns<ProjectRow>()(['id', 'name', 'created_at']);

const CHARGE_COLUMNS = allColumns<ChargeRow>()([
  'id',
  'work_item_id',
  'thread_id',
  'project_id',
  'model',
  'attempt',
  'repair',
  'status',
  'day',
  'reserved_tokens',
  'reserved_cost_usd',
  'prompt_tokens',
  'completion_tokens',
  'total_tokens',
  'cost_usd',
  'response_seq',
  'created_at',
  'settled_at',
  'outcome',
  'http_status',
  'latency_ms',
  'provider_request_id',
]);

/**
 * What a read of several items carries besides their rows, for the step that will use it (each read
 * apart was one statement per item):
 * - `start`: the type of the item's last ledger entry (a `response` means a replay queued it with its answer);
 * - `record`: the item's open reservation, which the answer settles (at most one: uq_charges_open_reservation),
 *   and its last entry's type (a `response` means this answer is already recorded: a re-run after a COMMIT
 *   whose outcome was unknown).
 */
export type ReadAhead = 'rows' | 'start' | 'record';

/** What each read-ahead adds to the item's row: columns, and the join they come from. */
const LAST_ENTRY_TYPE = ', (SELECT e.entry_type FROM llm_ledger_entries e WHERE e.work_item_id = w.id ORDER BY e.seq DESC LIMIT 1) AS x_last_entry_type';
const AHEAD: Record<ReadAhead, { columns: string; join: string }> = {
  rows: { columns: '', join: '' },
  start: { columns: LAST_ENTRY_TYPE, join: '' },
  record: {
    columns: `${LAST_ENTRY_TYPE}, ${CHARGE_COLUMNS.map((c) => `c.${c} AS c_${c}`).join(', ')}`,
    join: " LEFT JOIN llm_charges c ON c.work_item_id = w.id AND c.status = 'reserved'",
  },
};

/**
 * The item with its thread, its project and what `ahead` adds, of the items `where` names. The thread's
 * columns come back as `t_<column>`, the project's as `p_<column>` (the tables share `id`, `status`,
 * `created_at`). The project is the item's (`project_id`, its thread's target project); a project
 * deleted since is NULLs.
 */
const selectItemsWithThreads = (ahead: ReadAhead, where: string) => `SELECT ${ITEM_COLUMNS.map((c) => `w.${c}`).join(', ')},
    ${THREAD_COLUMNS.map((c) => `t.${c} AS t_${c}`).join(', ')}, ${PROJECT_COLUMNS.map((c) => `p.${c} AS p_${c}`).join(', ')}${AHEAD[ahead].columns}
  FROM llm_work_items w JOIN llm_threads t ON t.id = w.thread_id LEFT JOIN projects p ON p.id = w.project_id${AHEAD[ahead].join}
  WHERE ${where}`;

/** One text per read-ahead. */
const byAhead = <T>(text: (ahead: ReadAhead) => T): Record<ReadAhead, T> => ({ rows: text('rows'), start: text('start'), record: text('record') });

/** One item by its id: what a step that runs alone reads, with what it also needs (one round trip, not two). */
const ITEM_WITH_THREAD_TEXT = byAhead((ahead) => selectItemsWithThreads(ahead, 'w.id = ?'));

// `NO KEY UPDATE`: see db/dialect.ts `skipLockedRows`; `OF w`: the item's row only, not its thread's, project's or charge's.
const LOCK_ITEM_WITH_THREAD_PG = byAhead((ahead) => `${ITEM_WITH_THREAD_TEXT[ahead]} FOR NO KEY UPDATE OF w`);

/**
 * The items of a JSON array of ids (`?`), each looked up by its primary key. On Postgres the list is an
 * InitPlan's (dialect.ts `inJsonArrayInitPlanPg`): with `inJsonArray`'s constant array a list of one or two
 * ids made a custom plan cheaper than the generic one, so a connection planned this join of four tables again
 * at every call (test/unit/pg-item-lock-plans: every call a custom plan); with the InitPlan it keeps the generic
 * plan after its first five. In the diag's runs the lists held ~9–10 ids and were kept generic either way
 * (0.06–0.08 plans a call on both): the InitPlan matters for a slower trickle of short lists.
 */
const ITEMS_WITH_THREADS_TEXT = byAhead((ahead) => ({
  sqlite: selectItemsWithThreads(ahead, inJsonArray('sqlite', 'w.id', '?')),
  postgres: selectItemsWithThreads(ahead, inJsonArrayInitPlanPg('w.id', '?')),
}));

/**
 * Postgres: the items' rows locked in id order, as `lockWorkItemWithThread` locks one (a shared write
 * closure's steps change them). In id order because the heartbeat extends several items' leases too, in
 * id order (`extendLeases`): two transactions taking several of one daemon's items never cross.
 */
const LOCK_ITEMS_WITH_THREADS_PG = byAhead((ahead) => `${ITEMS_WITH_THREADS_TEXT[ahead].postgres} ORDER BY w.id FOR NO KEY UPDATE OF w`);

export interface ItemWithThread {
  item: WorkItemRow;
  thread: ThreadRow;
  /** The item's project; null when it no longer exists. */
  project: ProjectRow | null;
  /** Read ahead for the start (`ReadAhead`): the type of the item's last ledger entry, null if none; undefined when not read. */
  lastEntryType: string | null | undefined;
  /** Read ahead for the record (`ReadAhead`): the item's open reservation, null if none; undefined when not read. */
  openCharge: ChargeRow | null | undefined;
}

/**
 * The work item, its thread (a foreign key: an item always has one) and its project, as `SELECT *` of
 * each would read them; undefined when there is no such item.
 */
export function getWorkItemWithThread(sql: Sql, id: string): Promise<ItemWithThread | undefined> {
  return sql.get<Record<string, unknown>>(ITEM_WITH_THREAD_TEXT.rows, [id]).then((row) => splitRow(row, 'rows'));
}

/** What a claim round picked: a group's (project, priority) head in the round's heads. */
export interface ClaimPick {
  id: string;
  project_id: string;
  priority: number;
}

/** A claim candidate, and on Postgres its group's head once it is claimed. */
export interface ClaimCandidate extends ItemWithThread {
  /**
   * Postgres: the group's head once this item is claimed and its scope taken — what the group's re-read
   * after the claim (`listProjectClaimHeads`) would give it, read in the same statement: the group's
   * oldest other item that can run now, whose scope is free and not this item's; null when there is
   * none. Undefined on SQLite (its round re-reads the project's heads: no round trip there).
   */
  nextHead: ClaimHead | null | undefined;
}

/**
 * A claim round's read of what the fair scheduler picked: the item with its thread and project. On
 * SQLite, `pick` itself (the round's own transaction read the heads: the item is as they said). On
 * Postgres, the pick's group's oldest item that is still claimable now and that no other daemon's round
 * is reading for its claim, passing over `excluded` (this round's skipped items); undefined when there is
 * none. A round takes the item it reads under `claim:<id>`, an advisory lock only tried (never waited for)
 * and held to its COMMIT, so two rounds that picked the same head split the group between them here,
 * instead of both building the head's request and the later one's claim UPDATE finding it taken. A head
 * another daemon committed meanwhile is no longer `queued` and is passed over too. No row lock is taken:
 * the round's row locks keep their order (LOCK ORDER, engine/tx.ts).
 */
export async function readClaimCandidate(sql: Sql, pick: ClaimPick, now: number, excluded: readonly string[]): Promise<ClaimCandidate | undefined> {
  if (sql.dialect !== 'postgres') {
    const read = await getWorkItemWithThread(sql, pick.id);
    return read && { ...read, nextHead: undefined };
  }
  const row = await sql.get<Record<string, unknown>>(CLAIM_CANDIDATE_PG, claimCandidateParams(pick, now, excluded));
  return row && candidateOf(row);
}

// The conditions of a group's head (db/pg/claim-heads.ts), then the lock: tried only for an item whose
// scope is free (CASE keeps that order; AND's does not), so an item no one can claim now is not hidden
// from the other daemons' rounds until this one's COMMIT. The partial index idx_work_items_fair gives the
// group's items in `not_before` order: the first that passes ends the scan. Then the group's next head
// (`ClaimCandidate.nextHead`), with the head's conditions and no lock tried: the candidate and the items
// of its scope are left out, as the claim will lease the one and lock the other (the scopes this round
// locked before are rows of this transaction already). The candidate's read alone is also `c` of
// db/claim-with-scope.ts's statement that claims it in the same round trip.
export const CLAIM_CANDIDATE_READ_PG = `${selectItemsWithThreads(
  'rows',
  `w.status = 'queued' AND w.project_id = @project_id AND w.priority = @priority AND w.not_before <= @now
    AND (w.deadline_at IS NULL OR w.deadline_at > @now)
    AND NOT w.id = ANY(combine_text_array(CAST(@excluded AS jsonb)))
    AND CASE WHEN EXISTS (SELECT 1 FROM locks l WHERE l.scope = w.lock_scope AND (l.expires_at IS NULL OR l.expires_at > @now)) THEN false
             ELSE pg_try_advisory_xact_lock(hashtextextended('claim:' || w.id, 0)) END`,
)}
  ORDER BY w.not_before LIMIT 1`;

/** The candidate `c`'s next head (`nx`: its id, not_before, lock_scope), joined after it: see CLAIM_CANDIDATE_PG. */
export const NEXT_HEAD_JOIN_PG = `LEFT JOIN LATERAL (SELECT n.id, n.not_before, n.lock_scope FROM llm_work_items n
    WHERE n.status = 'queued' AND n.project_id = c.project_id AND n.priority = c.priority AND n.not_before <= @now
      AND (n.deadline_at IS NULL OR n.deadline_at > @now)
      AND n.id <> c.id AND n.lock_scope <> c.lock_scope
      AND NOT n.id = ANY(combine_text_array(CAST(@excluded AS jsonb)))
      AND NOT EXISTS (SELECT 1 FROM locks l WHERE l.scope = n.lock_scope AND (l.expires_at IS NULL OR l.expires_at > @now))
    ORDER BY n.not_before LIMIT 1) nx ON true`;

/** The next head's columns, named as `candidateOf` reads them. */
export const NEXT_HEAD_COLUMNS_PG = 'nx.id AS x_next_id, nx.not_before AS x_next_not_before, nx.lock_scope AS x_next_lock_scope';

const CLAIM_CANDIDATE_PG = `SELECT c.*, ${NEXT_HEAD_COLUMNS_PG} FROM (${CLAIM_CANDIDATE_READ_PG}) c
  ${NEXT_HEAD_JOIN_PG}`;

/** The parameters of CLAIM_CANDIDATE_READ_PG and NEXT_HEAD_JOIN_PG. */
export function claimCandidateParams(pick: ClaimPick, now: number, excluded: readonly string[]): Record<string, unknown> {
  return { project_id: pick.project_id, priority: pick.priority, now, excluded: JSON.stringify(excluded) };
}

/** The item's columns of `k`, a claimed row (`RETURNING *`), as `claimedItemOf` reads them: `k_<column>`. */
export const CLAIMED_ITEM_COLUMNS_PG = ITEM_COLUMNS.map((c) => `k.${c} AS k_${c}`).join(', ');

/** A row of CLAIM_CANDIDATE_PG's shape (the candidate's columns and its next head's) as the candidate it is. */
export function candidateOf(row: Record<string, unknown>): ClaimCandidate {
  const read = splitRow(row, 'rows')!;
  const { project_id, priority } = read.item;
  const nextHead =
    row.x_next_id === null
      ? null
      : { id: row.x_next_id as string, project_id, priority, not_before: row.x_next_not_before as number, lock_scope: row.x_next_lock_scope as string };
  return { ...read, nextHead };
}

/**
 * `getWorkItemWithThread` for a step of a leased item, which then changes it: on Postgres the item's row
 * is locked (`FOR NO KEY UPDATE OF w`, as a claim locks it) before the step's other rows — its charge, the
 * ledger's chain head. The recovery scan's take-over of an expired lease locks the item first too, then
 * closes its charge and appends at its COMMIT; a step that read the item unlocked and changed the charge
 * or appended first (recording the call's answer: chain head, then the charge's settle) waited for it
 * while it waited for the step. Now one waits for the other's item: the scan passes over a step's item
 * (SKIP LOCKED), and a step behind the scan reads the item as the scan left it (its lease lost). Same
 * statement (with what `ahead` adds), no other round trip; SQLite (one writer) reads it unlocked.
 */
export function lockWorkItemWithThread(sql: Sql, id: string, ahead: ReadAhead = 'rows'): Promise<ItemWithThread | undefined> {
  const text = sql.dialect === 'postgres' ? LOCK_ITEM_WITH_THREAD_PG[ahead] : ITEM_WITH_THREAD_TEXT[ahead];
  return sql.get<Record<string, unknown>>(text, [id]).then((row) => splitRow(row, ahead));
}

/**
 * `getWorkItemWithThread` of several items in one statement, by item id; an id with no item is absent.
 * (A shared write closure's steps, each of its own item: engine/shared-writes.ts.) On Postgres the
 * items' rows are locked, in id order (`LOCK_ITEMS_WITH_THREADS_PG`), before the steps' other rows.
 */
export async function lockWorkItemsWithThreads(sql: Sql, ids: readonly string[], ahead: ReadAhead = 'rows'): Promise<Map<string, ItemWithThread>> {
  const text = sql.dialect === 'postgres' ? LOCK_ITEMS_WITH_THREADS_PG[ahead] : ITEMS_WITH_THREADS_TEXT[ahead].sqlite;
  const rows = await sql.all<Record<string, unknown>>(text, [JSON.stringify(ids)]);
  const reads = new Map<string, ItemWithThread>();
  for (const row of rows) {
    const read = splitRow(row, ahead)!;
    reads.set(read.item.id, read);
  }
  return reads;
}

/** One shape for every read: what was not read ahead is undefined. */
function splitRow(row: Record<string, unknown> | undefined, ahead: ReadAhead): ItemWithThread | undefined {
  if (!row) return undefined;
  const project = row.p_id === null ? null : { id: row.p_id as string, name: row.p_name as string, created_at: row.p_created_at as number };
  return {
    item: itemOf(row) as WorkItemRow,
    thread: threadOf(row) as ThreadRow,
    project,
    lastEntryType: ahead !== 'rows' ? (row.x_last_entry_type as string | null) : undefined,
    openCharge: ahead !== 'record' ? undefined : row.c_id === null ? null : (chargeOf(row) as ChargeRow),
  };
}

// One object literal per row type (statements.ts `objectLiteralOf`), from the joined row's `<prefix><column>`;
// the names are this file's column lists, checked against the schema's row types.
const itemOf = objectLiteralOf<Record<string, unknown>>(ITEM_COLUMNS.map((c) => [c, c]));
const threadOf = objectLiteralOf<Record<string, unknown>>(THREAD_COLUMNS.map((c) => [c, `t_${c}`]));
/** The claimed item of a row with CLAIMED_ITEM_COLUMNS_PG. */
export const claimedItemOf = objectLiteralOf<Record<string, unknown>>(ITEM_COLUMNS.map((c) => [c, `k_${c}`])) as (row: Record<string, unknown>) => WorkItemRow;
const chargeOf = objectLiteralOf<Record<string, unknown>>(CHARGE_COLUMNS.map((c) => [c, `c_${c}`]));
