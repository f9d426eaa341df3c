/** mutations: the record that a work item's change was applied to a document (at most once). */
import type { Sql } from '../core/sql.js';
import type { MutationRow } from './schema.js';
import { runStatement } from './statements.js';

/** Throws (UNIQUE on work_item_id) if this work item already applied a mutation. */
export function insertMutation(sql: Sql, row: MutationRow): Promise<void> {
  return runStatement(
    sql,
    `INSERT INTO mutations (id, work_item_id, thread_id, document_id, from_version, to_version, summary, created_at)
     VALUES (@id, @work_item_id, @thread_id, @document_id, @from_version, @to_version, @summary, @created_at)`,
    row,
  );
}
