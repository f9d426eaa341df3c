/**
 * `IN (…)` of a thread and its children (one level deep: an orchestration's), for a `thread_id` column:
 * one list, the thread, then its children — never `thread_id = <id> OR thread_id IN (<children>)`, for
 * which Postgres has no index path and reads the whole table (llm_charges, llm_ledger_entries) at any
 * size; the list is looked up by the table's thread index (test/unit/pg-usage-plans.test.ts).
 * `idExpr`: the thread's id as SQL — a parameter (`@id`) or a column of the outer statement.
 */
export function inThreadAndChildren(idExpr: string): string {
  return `IN (SELECT ${idExpr} UNION ALL SELECT id FROM llm_threads WHERE parent_thread_id = ${idExpr})`;
}
