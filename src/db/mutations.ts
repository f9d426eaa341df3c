/** mutations: the record that a work item's change was applied to a document (at most once). */
import type { Sql } from '../core/sql.js';
import type { MutationRow } from './schema.js';
import { runAtCommit } from './statements.js';

const INSERT_MUTATION = `INSERT INTO mutations (id, work_item_id, thread_id, document_id, from_version, to_version, summary, created_at, response_seq)
     VALUES (@id, @work_item_id, @thread_id, @document_id, @from_version, @to_version, @summary, @created_at, @response_seq)`;

/**
 * Throws (UNIQUE on work_item_id) if this work item already applied a mutation. On a handle that runs
 * statements in its COMMIT's query (the Postgres writer's `Sql.atCommit`) it goes there: a round trip
 * less while the target document's row is locked, and it needs no answer — a second application of the item
 * fails the COMMIT's query on the unique key, which rolls the whole transaction back.
 */
export function insertMutation(sql: Sql, row: MutationRow): Promise<void> {
  return runAtCommit(sql, INSERT_MUTATION, row);
}
