/** mutations: the record that a work item's change was applied to a document (at most once). */
import type { Db } from './connection.js';
import type { MutationRow } from './schema.js';
import { prepared } from './statements.js';

/** Throws (UNIQUE on work_item_id) if this work item already applied a mutation. */
export function insertMutation(db: Db, row: MutationRow): void {
  prepared(
    db,
    `INSERT INTO mutations (id, work_item_id, thread_id, document_id, from_version, to_version, summary, created_at)
     VALUES (@id, @work_item_id, @thread_id, @document_id, @from_version, @to_version, @summary, @created_at)`,
  ).run(row);
}

export function getMutationForWorkItem(db: Db, workItemId: string): MutationRow | undefined {
  return prepared(db, 'SELECT * FROM mutations WHERE work_item_id = ?').get(workItemId) as MutationRow | undefined;
}

export function countMutationsForThread(db: Db, threadId: string): number {
  return (prepared(db, 'SELECT count(*) AS n FROM mutations WHERE thread_id = ?').get(threadId) as { n: number }).n;
}
