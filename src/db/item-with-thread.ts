/**
 * A work item, its thread and its project in one statement. Every engine step (claim, start, response,
 * answer) works with the item and its thread, and the two that build the item's request (claim, start)
 * with its project: read apart, they were ten primary-key look-ups per item.
 */
import type { Sql } from '../core/sql.js';
import type { ProjectRow, ThreadRow, WorkItemRow } from './schema.js';
import { inJsonArray } from './dialect.js';
import { objectLiteralOf } from './statements.js';

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

/**
 * The thread's columns come back as `t_<column>`, the project's as `p_<column>` (the tables share `id`,
 * `status`, `created_at`). The project is the item's (`project_id`, its thread's target project); a
 * project deleted since is NULLs.
 */
const SELECT_ITEM_WITH_THREAD = `SELECT ${ITEM_COLUMNS.map((c) => `w.${c}`).join(', ')},
    ${THREAD_COLUMNS.map((c) => `t.${c} AS t_${c}`).join(', ')}, ${PROJECT_COLUMNS.map((c) => `p.${c} AS p_${c}`).join(', ')}
  FROM llm_work_items w JOIN llm_threads t ON t.id = w.thread_id LEFT JOIN projects p ON p.id = w.project_id`;

const ITEM_WITH_THREAD_TEXT = `${SELECT_ITEM_WITH_THREAD}
  WHERE w.id = ?`;

/** The items of a JSON array of ids (`?`), each looked up by its primary key. */
const ITEMS_WITH_THREADS_TEXT = {
  sqlite: `${SELECT_ITEM_WITH_THREAD}
  WHERE ${inJsonArray('sqlite', 'w.id', '?')}`,
  postgres: `${SELECT_ITEM_WITH_THREAD}
  WHERE ${inJsonArray('postgres', 'w.id', '?')}`,
};

export interface ItemWithThread {
  item: WorkItemRow;
  thread: ThreadRow;
  /** The item's project; null when it no longer exists. */
  project: ProjectRow | null;
}

/**
 * The work item, its thread (a foreign key: an item always has one) and its project, as `SELECT *` of
 * each would read them; undefined when there is no such item.
 */
export function getWorkItemWithThread(sql: Sql, id: string): Promise<ItemWithThread | undefined> {
  return sql.get<Record<string, unknown>>(ITEM_WITH_THREAD_TEXT, [id]).then(splitRow);
}

/**
 * `getWorkItemWithThread` of several items in one statement, by item id; an id with no item is absent.
 * (A shared write closure's steps, each of its own item: engine/shared-writes.ts.)
 */
export async function listWorkItemsWithThreads(sql: Sql, ids: readonly string[]): Promise<Map<string, ItemWithThread>> {
  const rows = await sql.all<Record<string, unknown>>(ITEMS_WITH_THREADS_TEXT[sql.dialect], [JSON.stringify(ids)]);
  const reads = new Map<string, ItemWithThread>();
  for (const row of rows) {
    const read = splitRow(row)!;
    reads.set(read.item.id, read);
  }
  return reads;
}

function splitRow(row: Record<string, unknown> | undefined): ItemWithThread | undefined {
  if (!row) return undefined;
  const project = row.p_id === null ? null : { id: row.p_id as string, name: row.p_name as string, created_at: row.p_created_at as number };
  return { item: itemOf(row) as WorkItemRow, thread: threadOf(row) as ThreadRow, project };
}

// One object literal per row type (statements.ts `objectLiteralOf`), from the joined row's `<prefix><column>`;
// the names are this file's column lists, checked against the schema's row types.
const itemOf = objectLiteralOf<Record<string, unknown>>(ITEM_COLUMNS.map((c) => [c, c]));
const threadOf = objectLiteralOf<Record<string, unknown>>(THREAD_COLUMNS.map((c) => [c, `t_${c}`]));
