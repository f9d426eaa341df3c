/**
 * The fair scheduler's candidates (db/work-item-claims.ts `listClaimHeads`, `listProjectClaimHeads`) on
 * Postgres, each in one statement: every step of a skip-scan walked from the client would be a network
 * round trip (~4 per project, ~8 per claimed item). The skip-scan runs on the server: a recursive CTE seeks
 * idx_work_items_fair to the next group, and a LATERAL subquery takes each group's head with the same
 * conditions as SQLite's `groupHead` (due, not past its deadline, its lock scope free).
 */
import type { Sql } from '../../core/sql.js';
import type { WorkItemRow } from '../schema.js';

/** db/work-item-claims.ts's `ClaimHead` (the same shape; named here because the layering rules forbid even a type-only import cycle). */
type ClaimHead = Pick<WorkItemRow, 'id' | 'project_id' | 'priority' | 'not_before' | 'lock_scope'>;

/** A group's head: the oldest item that can run now (`g` is the group's row). */
function headOf(excluding: boolean): string {
  return `SELECT w.id, w.project_id, w.priority, w.not_before, w.lock_scope FROM llm_work_items w
     WHERE w.status = 'queued' AND w.project_id = g.project_id AND w.priority = g.priority AND w.not_before <= @now
       AND (w.deadline_at IS NULL OR w.deadline_at > @now)${excluding ? '\n       AND NOT w.id = ANY(combine_text_array(CAST(@excluded AS jsonb)))' : ''}
       AND NOT EXISTS (
         SELECT 1 FROM locks l
         WHERE l.scope = w.lock_scope AND (l.expires_at IS NULL OR l.expires_at > @now))
     ORDER BY w.not_before LIMIT 1`;
}

const ALL_HEADS = `WITH RECURSIVE g(project_id, priority) AS (
    (SELECT project_id, priority FROM llm_work_items WHERE status = 'queued' ORDER BY project_id, priority LIMIT 1)
    UNION ALL
    SELECT n.project_id, n.priority FROM g CROSS JOIN LATERAL (
      SELECT x.project_id, x.priority FROM llm_work_items x
      WHERE x.status = 'queued' AND (x.project_id, x.priority) > (g.project_id, g.priority)
      ORDER BY x.project_id, x.priority LIMIT 1) n
  )
  SELECT h.* FROM g CROSS JOIN LATERAL (${headOf(false)}) h
  ORDER BY h.project_id, h.priority`;

function projectHeadsText(excluding: boolean): string {
  return `WITH RECURSIVE g(project_id, priority) AS (
    (SELECT project_id, priority FROM llm_work_items WHERE status = 'queued' AND project_id = @project_id ORDER BY priority LIMIT 1)
    UNION ALL
    SELECT n.project_id, n.priority FROM g CROSS JOIN LATERAL (
      SELECT x.project_id, x.priority FROM llm_work_items x
      WHERE x.status = 'queued' AND x.project_id = @project_id AND x.priority > g.priority
      ORDER BY x.priority LIMIT 1) n
  )
  SELECT h.* FROM g CROSS JOIN LATERAL (${headOf(excluding)}) h
  ORDER BY h.priority`;
}

const PROJECT_HEADS = projectHeadsText(false);
const PROJECT_HEADS_EXCLUDING = projectHeadsText(true);

/** Every group's head, in (project, priority) order. */
export function listClaimHeadsPg(sql: Sql, now: number): Promise<ClaimHead[]> {
  return sql.all<ClaimHead>(ALL_HEADS, { now });
}

/** One project's heads, by priority, passing over the items in `excluded`. */
export function listProjectClaimHeadsPg(sql: Sql, projectId: string, now: number, excluded: readonly string[]): Promise<ClaimHead[]> {
  return excluded.length > 0
    ? sql.all<ClaimHead>(PROJECT_HEADS_EXCLUDING, { project_id: projectId, now, excluded: JSON.stringify(excluded) })
    : sql.all<ClaimHead>(PROJECT_HEADS, { project_id: projectId, now });
}
