/**
 * An orchestration's new children (generate-all: one thread and one queued work item per epic), written
 * together. On Postgres each table's rows go in one statement per chunk: one INSERT per child and table was
 * a round trip each, two per item of a generate-all (bench/diag-pg.ts). A chunk holds at most
 * `MAX_CHUNK_ROWS` rows and about `MAX_CHUNK_CHARS` characters (UTF-16 code units) of JSON, so a statement
 * stays of bounded size however many children an orchestration has. SQLite runs its one prepared
 * single-row statement per row: a statement there is a function call, not a round trip.
 */
import type { Sql } from '../core/sql.js';
import { StaleStateError } from '../core/errors.js';
import type { ThreadRow, WorkItemRow } from './schema.js';
import { insertThreadUnlessActive } from './threads.js';
import { insertWorkItem } from './work-items.js';

const MAX_CHUNK_ROWS = 1_000;
const MAX_CHUNK_CHARS = 1 << 20;

/**
 * The rows as JSON array texts of at most `MAX_CHUNK_ROWS` rows each, a new chunk begun before one would
 * pass `MAX_CHUNK_CHARS` (a chunk holds at least one row, however large: a child's input is bounded).
 * Strings are made well formed first: a lone UTF-16 surrogate becomes U+FFFD, as the single-row insert's
 * UTF-8 parameter stores it — JSON.stringify would write it as a `\ud800` escape, which Postgres's json
 * parser refuses, failing the whole orchestration.
 */
function jsonChunks(rows: readonly object[]): { json: string; rows: number }[] {
  const chunks: { json: string; rows: number }[] = [];
  let texts: string[] = [];
  let chars = 0;
  for (const row of rows) {
    const text = JSON.stringify(row, wellFormed);
    if (texts.length > 0 && (texts.length === MAX_CHUNK_ROWS || chars + text.length > MAX_CHUNK_CHARS)) {
      chunks.push({ json: `[${texts.join(',')}]`, rows: texts.length });
      texts = [];
      chars = 0;
    }
    texts.push(text);
    chars += text.length + 1;
  }
  if (texts.length > 0) chunks.push({ json: `[${texts.join(',')}]`, rows: texts.length });
  return chunks;
}

function wellFormed(_key: string, value: unknown): unknown {
  return typeof value === 'string' ? value.toWellFormed() : value;
}

/** Each column's Postgres type, for `jsonb_to_recordset`: a column of the row type missing here fails to compile. */
type ColumnTypes<R> = { readonly [K in keyof R & string]: 'text' | 'integer' | 'bigint' };

/** The column list and the recordset's column definitions of `types`, in one order. */
function recordsetOf<R>(types: ColumnTypes<R>): { columns: string; definitions: string } {
  const names = Object.keys(types) as (keyof R & string)[];
  return { columns: names.join(', '), definitions: names.map((c) => `${c} ${types[c]}`).join(', ') };
}

/** llm_threads' columns and their Postgres types (pg-new-children.test.ts checks them against the table). */
export const THREAD_COLUMN_TYPES: ColumnTypes<ThreadRow> = {
  id: 'text',
  kind: 'text',
  space_type: 'text',
  space_id: 'text',
  target_ref: 'text',
  status: 'text',
  parent_thread_id: 'text',
  idempotency_key: 'text',
  role: 'text',
  input: 'text',
  created_by: 'text',
  traceparent: 'text',
  created_at: 'bigint',
  closed_at: 'bigint',
};
const THREADS = recordsetOf(THREAD_COLUMN_TYPES);

/**
 * db/threads.ts `insertThreadUnlessActive` of a chunk's rows, in their order: a row whose idempotency key
 * an open or running thread has (committed by another transaction, which the insert waits for, or an
 * earlier row of the chunk) is not inserted; the ids of those inserted are returned.
 */
const INSERT_THREADS_UNLESS_ACTIVE_PG = `INSERT INTO llm_threads (${THREADS.columns})
  SELECT ${THREADS.columns} FROM jsonb_to_recordset(CAST(@rows AS jsonb)) AS r(${THREADS.definitions})
  ON CONFLICT (idempotency_key) WHERE status IN ('open', 'running') DO NOTHING
  RETURNING id`;

/**
 * Inserts each thread unless an open or running thread already has its key (as `insertThreadUnlessActive`
 * does one): the ids of the threads inserted. The rows are inserted in their order.
 */
export async function insertThreadsUnlessActive(sql: Sql, rows: readonly ThreadRow[]): Promise<Set<string>> {
  const inserted = new Set<string>();
  if (sql.dialect !== 'postgres') {
    for (const row of rows) if (await insertThreadUnlessActive(sql, row)) inserted.add(row.id);
    return inserted;
  }
  for (const chunk of jsonChunks(rows)) {
    for (const { id } of await sql.all<{ id: string }>(INSERT_THREADS_UNLESS_ACTIVE_PG, { rows: chunk.json })) inserted.add(id);
  }
  return inserted;
}

/** llm_work_items' columns and their Postgres types (pg-new-children.test.ts checks them against the table). */
export const ITEM_COLUMN_TYPES: ColumnTypes<WorkItemRow> = {
  id: 'text',
  thread_id: 'text',
  sequence: 'integer',
  status: 'text',
  attempt: 'integer',
  max_attempts: 'integer',
  repair_count: 'integer',
  escalated: 'integer',
  lock_scope: 'text',
  project_id: 'text',
  priority: 'integer',
  not_before: 'bigint',
  deadline_at: 'bigint',
  lease_owner: 'text',
  lease_expires_at: 'bigint',
  error_code: 'text',
  error_message: 'text',
  created_at: 'bigint',
  started_at: 'bigint',
  finished_at: 'bigint',
};
const ITEMS = recordsetOf(ITEM_COLUMN_TYPES);

/** db/work-items.ts `insertWorkItem` of a chunk's rows. */
const INSERT_WORK_ITEMS_PG = `INSERT INTO llm_work_items (${ITEMS.columns})
  SELECT ${ITEMS.columns} FROM jsonb_to_recordset(CAST(@rows AS jsonb)) AS r(${ITEMS.definitions})`;

/** Inserts the work items (new rows: every one is inserted, or the statement fails). */
export async function insertWorkItems(sql: Sql, rows: readonly WorkItemRow[]): Promise<void> {
  if (sql.dialect !== 'postgres') {
    for (const row of rows) await insertWorkItem(sql, row);
    return;
  }
  for (const chunk of jsonChunks(rows)) {
    const { changes } = await sql.run(INSERT_WORK_ITEMS_PG, { rows: chunk.json });
    if (changes !== chunk.rows) throw new StaleStateError(`${chunk.rows} work items to insert, ${changes} inserted`);
  }
}
