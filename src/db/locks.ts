/**
 * locks: visible, inspectable mutual exclusion, named by the operation (`epic:{project}:{epic}`,
 * `project:{project}`, …). A row is a held lock; its owner is the work item whose mutation it guards, or
 * the orchestration thread that holds it while its children run. `expires_at` makes an abandoned lock
 * reclaimable; null means held until released.
 */
import type { Sql } from '../core/sql.js';
import type { LockRow } from './schema.js';
import { skipLockedLockRows } from './dialect.js';
import { changedOne } from './statements.js';

/**
 * Takes `scope` for `owner` if it is free, expired, or already the owner's. Returns false when a live
 * holder has it.
 */
export function acquireLock(sql: Sql, p: { scope: string; owner: string; now: number; expires_at: number | null }): Promise<boolean> {
  return changedOne(
    sql,
    `INSERT INTO locks (scope, owner, acquired_at, expires_at) VALUES (@scope, @owner, @now, @expires_at)
     ON CONFLICT (scope) DO UPDATE
       SET owner = excluded.owner, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
       WHERE locks.owner = excluded.owner OR (locks.expires_at IS NOT NULL AND locks.expires_at <= @now)`,
    p,
  );
}

/** Releases `scope` if `owner` still holds it. */
export function releaseLock(sql: Sql, scope: string, owner: string): Promise<boolean> {
  return changedOne(sql, 'DELETE FROM locks WHERE scope = ? AND owner = ?', [scope, owner]);
}

export async function extendLock(sql: Sql, scope: string, owner: string, expiresAt: number): Promise<boolean> {
  return (await sql.run('UPDATE locks SET expires_at = ? WHERE scope = ? AND owner = ?', [expiresAt, scope, owner])).changes === 1;
}

export async function getLock(sql: Sql, scope: string): Promise<LockRow | undefined> {
  return (await sql.get('SELECT * FROM locks WHERE scope = ?', [scope])) as LockRow | undefined;
}

/**
 * Releases every lock `owner` holds (an orchestration ending, a thread canceled); returns how many. Not
 * an error when it is none: a canceled work thread's locks are its items', and an orchestration's lock
 * may already have been swept while it was not active (`releaseOrphanedLocks`).
 */
export async function releaseLocksOwnedBy(sql: Sql, owner: string): Promise<number> {
  return (await sql.run('DELETE FROM locks WHERE owner = ?', [owner])).changes;
}

/**
 * Deletes locks whose owner is gone, whatever their scope: the owner is neither a work item that holds
 * a lease (claimed, running) nor a thread still open or running. Owners are ids unique across both
 * tables, so one condition covers item locks and orchestration locks. Returns the released scopes.
 *
 * On Postgres the candidates are locked first, passing over lock rows another daemon's transaction is
 * writing: a claim taking an expired lock for a new item has not committed the item's lease yet, so
 * this statement's snapshot would call its fresh lock orphaned (a DELETE waiting for that row re-checks
 * the row, not the NOT EXISTS subqueries). Skipped rows are looked at by the next sweep.
 */
export async function releaseOrphanedLocks(sql: Sql): Promise<string[]> {
  const rows = (await sql.all(`DELETE FROM locks
     WHERE scope IN (
       SELECT l.scope FROM locks l
       WHERE NOT EXISTS (SELECT 1 FROM llm_work_items w WHERE w.id = l.owner AND w.status IN ('claimed', 'running'))
         AND NOT EXISTS (SELECT 1 FROM llm_threads t WHERE t.id = l.owner AND t.status IN ('open', 'running'))${skipLockedLockRows(sql.dialect)})
     RETURNING scope`)) as { scope: string }[];
  return rows.map((r) => r.scope);
}
