/** The reads behind an operation's `threads` prompt context: a project's thread counts and newest threads. */
import type { Sql } from '../core/sql.js';
import { inJsonArray } from './dialect.js';

/** Thread counts by status for a project, threads of the `exclude` kinds left out. */
export async function countProjectThreadsByStatus(sql: Sql, projectId: string, exclude: readonly string[]): Promise<{ status: string; n: number }[]> {
  return (await sql.all(
    `SELECT status, count(*) AS n FROM llm_threads
     WHERE space_id = ? AND NOT ${inJsonArray(sql.dialect, 'kind', '?')} GROUP BY status ORDER BY status`,
    [projectId, JSON.stringify(exclude)],
  )) as { status: string; n: number }[];
}

export interface ThreadWithError {
  id: string;
  kind: string;
  status: string;
  target_ref: string;
  created_at: number;
  error_code: string | null;
}

/**
 * A project's newest threads in the given statuses, threads of the `exclude` kinds left out, each with
 * the error code of its latest work item (why it failed, or why it is waiting).
 */
export async function listProjectThreadsWithStatus(
  sql: Sql,
  p: { projectId: string; statuses: readonly string[]; exclude: readonly string[]; limit: number },
): Promise<ThreadWithError[]> {
  return (await sql.all(
    `SELECT t.id, t.kind, t.status, t.target_ref, t.created_at,
       (SELECT w.error_code FROM llm_work_items w WHERE w.thread_id = t.id ORDER BY w.sequence DESC LIMIT 1) AS error_code
     FROM llm_threads t
     WHERE t.space_id = @projectId AND NOT ${inJsonArray(sql.dialect, 't.kind', '@exclude')}
       AND ${inJsonArray(sql.dialect, 't.status', '@statuses')}
     ORDER BY t.created_at DESC, t.id LIMIT @limit`,
    { projectId: p.projectId, exclude: JSON.stringify(p.exclude), statuses: JSON.stringify(p.statuses), limit: p.limit },
  )) as ThreadWithError[];
}
